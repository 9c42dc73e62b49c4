package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// configKey is a table configuration key and what it does.
type configKey struct{ key, what string }

// knownConfigKeys are the table configuration keys this build reads, with what they do
// (for --help, and the note about a "shale." key it does not know).
var knownConfigKeys = []configKey{
	{engine.ConfigCompression, "data file codec: zstd (the default), lz4 or none"},
	{engine.ConfigCompressionLevel, "ZSTD level, 1 (the default, fastest) to " + strconv.Itoa(fragment.MaxZstdLevel) + " (smallest); lz4 and none ignore it"},
	{engine.ConfigWALShards, "write-ahead log shards (shale wal append sets 1)"},
	{engine.ConfigWALFlushBytes, "WAL memtable bytes that start a flush"},
	{engine.ConfigWALFlushInterval, "WAL memtable age that starts a flush (a Go duration, 1m)"},
	{engine.ConfigWALBacklogSoft, "unmerged WAL bytes above which appends wait"},
	{engine.ConfigWALBacklogHard, "unmerged WAL bytes at which appends fail"},
	{manifest.ConfigIdempotencyKeys, "how many idempotency keys of the newest keyed writes the table remembers"},
}

// codecTradeoff is the one-sentence trade-off of the codecs, for --help.
const codecTradeoff = `ZSTD (the default) makes the smallest data files; LZ4 makes larger ones (2.3x on
the benchmark's flights data) that scan faster (about 1.7x); none stores them
uncompressed.`

// configKeyHelp lists knownConfigKeys for --help, one per line, aligned.
func configKeyHelp() string {
	w := 0
	for _, k := range knownConfigKeys {
		w = max(w, len(k.key))
	}
	var b strings.Builder
	for _, k := range knownConfigKeys {
		fmt.Fprintf(&b, "  %-*s  %s\n", w, k.key, k.what)
	}
	return strings.TrimRight(b.String(), "\n")
}

// configJSON is `shale config TABLE --json`: the table's configuration at a version.
type configJSON struct {
	Table   string            `json:"table"`
	Version uint64            `json:"version"`
	Config  map[string]string `json:"config"`
}

// configChangeJSON is `shale config TABLE KEY=VALUE... --json`: the version a change
// committed, what it set and unset, and the configuration at that version.
type configChangeJSON struct {
	Table   string            `json:"table"`
	Version uint64            `json:"version"`
	Set     map[string]string `json:"set"`
	Unset   []string          `json:"unset"`
	Config  map[string]string `json:"config"`
	// AlsoPublished lists other writers' versions the change's publish made visible.
	AlsoPublished []engine.PublishedVersion `json:"also_published"`
}

func (a *app) configCommand() *cobra.Command {
	var unset []string
	cmd := &cobra.Command{
		Use:   "config TABLE [KEY=VALUE...] [--unset KEY]...",
		Short: "Show or change a table's configuration (codec, WAL, ...)",
		Long: `Without KEY=VALUE or --unset, print the table's configuration at its current
(published) version: one "key = value" per line, sorted.

With them, set each KEY to VALUE and remove each --unset KEY, all in one new version
(an update_config version that touches no data), and print that version. A value the
engine does not accept for a key it reads (shale.write.compression=brotli, a level outside
1-` + strconv.Itoa(fragment.MaxZstdLevel) + `, shale.wal.shards=abc, a flush interval that is not a duration), or a key
with white space, fails naming the key, and nothing is committed. Unsetting a key the
table does not have is allowed.

Keys this build reads:
` + configKeyHelp() + `

` + codecTradeoff + ` The codec keys apply to the table's writes from the next version on
(imports, appends, updates, overwrites, compaction's rewrites) that start after the
change; data files written before keep their codec until compaction rewrites them.

As the engine does, any other key is stored as given, so applications can keep their
own settings with the table (a key starting with "shale." that this build does not read
is stored too, with a note on stderr, as it is likely a typo).`,
		Example: `  shale config trips
  shale config trips shale.write.compression=lz4
  shale config trips shale.write.compression=zstd shale.write.compression_level=9
  shale config trips --unset shale.write.compression_level`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("config needs TABLE (got no arguments)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			table := args[0]
			upserts, err := parseConfigArgs(args[1:], unset)
			if err != nil {
				return err
			}
			if err := checkTableName(table); err != nil {
				return err
			}
			if len(upserts) == 0 && len(unset) == 0 {
				a.readOnly = true
				return a.showConfig(cmd.Context(), table)
			}
			// Check the values before any I/O (UpdateConfig checks them again).
			if _, err := engine.TableWriteOptions(engine.WriteOptions{}, upserts); err != nil {
				return fmt.Errorf("table %q: %w (nothing was committed)", table, err)
			}
			return a.changeConfig(cmd.Context(), table, upserts, unset)
		},
	}
	cmd.Flags().StringArrayVar(&unset, "unset", nil, "remove KEY from the configuration (repeatable)")
	return cmd
}

// parseConfigArgs parses KEY=VALUE arguments and checks them against the --unset keys.
// Errors (usage errors): an argument without "=", an empty key, a key given twice, a key
// both set and unset, an empty --unset.
func parseConfigArgs(args, unset []string) (map[string]string, error) {
	upserts := map[string]string{}
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		switch {
		case !ok:
			return nil, usagef("argument %q: want KEY=VALUE (use --unset KEY to remove a key)", arg)
		case strings.TrimSpace(k) == "":
			return nil, usagef("argument %q: the key before \"=\" is empty", arg)
		}
		if old, dup := upserts[k]; dup {
			return nil, usagef("key %q is given twice (%q and %q)", k, old, v)
		}
		upserts[k] = v
	}
	for _, k := range unset {
		if strings.TrimSpace(k) == "" {
			return nil, usagef("--unset needs a key")
		}
		if _, ok := upserts[k]; ok {
			return nil, usagef("key %q is both set and unset", k)
		}
	}
	return upserts, nil
}

// showConfig prints table's configuration at its published version.
func (a *app) showConfig(ctx context.Context, table string) error {
	t, err := a.openTable(ctx, table)
	if err != nil {
		return err
	}
	cfg := t.Config()
	if a.jsonOut {
		return a.printJSON(configJSON{Table: table, Version: t.Version(), Config: cfg})
	}
	if len(cfg) == 0 {
		a.printf("Table %s has no configuration at version %d (writes use the defaults: zstd, level 1)\n", table, t.Version())
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		a.printf("%s = %s\n", k, cfg[k])
	}
	return nil
}

// changeConfig commits one UpdateConfig version of table and prints it.
func (a *app) changeConfig(ctx context.Context, table string, upserts map[string]string, unset []string) error {
	a.noteUnknownKeys(upserts)
	t, err := a.openTable(ctx, table)
	if err != nil {
		return err
	}
	unset = slices.Compact(slices.Sorted(slices.Values(unset)))
	cr, err := t.UpdateConfig(ctx, upserts, unset)
	if err != nil {
		var ue *engine.UnknownError
		if errors.Is(err, engine.ErrInvalidConfig) && !errors.As(err, &ue) {
			return fmt.Errorf("%w (nothing was committed)", err)
		}
		return droppedWhile(err, table, "config change", "nothing was changed")
	}
	a.notePublished(table, cr.AlsoPublished)
	if a.jsonOut {
		return a.printJSON(configChangeJSON{Table: table, Version: cr.Version, Set: upserts, Unset: orEmpty(unset),
			Config: t.Config(), AlsoPublished: orEmpty(cr.AlsoPublished)})
	}
	a.printf("%s on %s: version %d\n", describeChange(upserts, unset), table, cr.Version)
	return nil
}

// describeChange words a configuration change: "Set k=v, k2=v2; unset k3".
func describeChange(upserts map[string]string, unset []string) string {
	var parts []string
	if len(upserts) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(upserts)) {
			kv = append(kv, k+"="+upserts[k])
		}
		parts = append(parts, "Set "+strings.Join(kv, ", "))
	}
	if len(unset) > 0 {
		verb := "Unset "
		if len(parts) > 0 {
			verb = "unset "
		}
		parts = append(parts, verb+strings.Join(unset, ", "))
	}
	return strings.Join(parts, "; ")
}

// noteUnknownKeys says on stderr which keys starting with "shale." this build does not
// read (they are stored anyway, as the engine allows any key).
func (a *app) noteUnknownKeys(upserts map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(upserts)) {
		if !strings.HasPrefix(k, "shale.") || slices.ContainsFunc(knownConfigKeys, func(c configKey) bool { return c.key == k }) {
			continue
		}
		fmt.Fprintf(a.stderr, "note: %s is not a key this build of shale reads (see 'shale config --help'); it is stored as given\n", k)
	}
}

// codecFlags are create's and import's --compression and --compression-level: the codec
// configuration of a new table.
type codecFlags struct {
	codec string
	level int
}

func (c *codecFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.codec, "compression", "", "data file codec of a new table: zstd, lz4 or none (sets "+engine.ConfigCompression+"; default zstd)")
	fs.IntVar(&c.level, "compression-level", 0, "ZSTD level of a new table, 1-"+strconv.Itoa(fragment.MaxZstdLevel)+" (sets "+engine.ConfigCompressionLevel+"; default 1)")
}

// config returns the table configuration the flags ask for (nil when neither was given),
// checked as the engine checks it. Errors (usage errors) wrap engine.ErrInvalidConfig
// naming the key, or say that a level needs zstd.
func (c *codecFlags) config(fs *pflag.FlagSet) (map[string]string, error) {
	cfg := map[string]string{}
	if flagChanged(fs, "compression") {
		cfg[engine.ConfigCompression] = c.codec
	}
	if flagChanged(fs, "compression-level") {
		cfg[engine.ConfigCompressionLevel] = strconv.Itoa(c.level)
	}
	if len(cfg) == 0 {
		return nil, nil
	}
	for _, f := range []struct{ flag, key string }{{"--compression", engine.ConfigCompression}, {"--compression-level", engine.ConfigCompressionLevel}} {
		if v, ok := cfg[f.key]; ok {
			if _, err := engine.TableWriteOptions(engine.WriteOptions{}, map[string]string{f.key: v}); err != nil {
				return nil, &usageError{fmt.Errorf("%s %s: %w", f.flag, v, err)}
			}
		}
	}
	wo, err := engine.TableWriteOptions(engine.WriteOptions{}, cfg)
	if err != nil {
		return nil, &usageError{err}
	}
	if _, ok := cfg[engine.ConfigCompressionLevel]; ok && wo.Compression != "" && wo.Compression != engine.CompressionZstd {
		return nil, usagef("--compression-level applies to zstd only (--compression %s has no levels)", c.codec)
	}
	return cfg, nil
}

// configString words a configuration for people: "shale.write.compression=lz4, ...".
func configString(cfg map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		kv = append(kv, k+"="+cfg[k])
	}
	return strings.Join(kv, ", ")
}

// existingTableCodecError refuses --compression flags for a table that exists already.
func existingTableCodecError(table string, cfg map[string]string) error {
	return usagef("table %s exists: --compression and --compression-level only configure a new table (nothing was written); change its codec with 'shale config %s %s', which applies to its writes from then on",
		table, table, strings.ReplaceAll(configString(cfg), ", ", " "))
}
