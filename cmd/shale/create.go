package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
)

// schemaTypes are the column types `create --schema` accepts.
var schemaTypes = map[string]arrow.DataType{
	"int16":         arrow.PrimitiveTypes.Int16,
	"int32":         arrow.PrimitiveTypes.Int32,
	"int64":         arrow.PrimitiveTypes.Int64,
	"float32":       arrow.PrimitiveTypes.Float32,
	"float64":       arrow.PrimitiveTypes.Float64,
	"string":        arrow.BinaryTypes.String,
	"bool":          arrow.FixedWidthTypes.Boolean,
	"timestamp[us]": &arrow.TimestampType{Unit: arrow.Microsecond},
	"date32":        arrow.FixedWidthTypes.Date32,
}

const schemaTypeList = "int16, int32, int64, float32, float64, string, bool, timestamp[us], date32"

// parseSchema parses "name:type,name:type,...". Columns are nullable unless the type ends
// in "!" (e.g. "id:int64!"). Errors name the bad entry.
func parseSchema(spec string) (*arrow.Schema, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("empty schema (want name:type,... with types %s)", schemaTypeList)
	}
	var fields []arrow.Field
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		name, typ = strings.TrimSpace(name), strings.ToLower(strings.TrimSpace(typ))
		if !ok || name == "" || typ == "" {
			return nil, fmt.Errorf("schema entry %q: want name:type", part)
		}
		nullable := true
		if t, found := strings.CutSuffix(typ, "!"); found {
			typ, nullable = t, false
		}
		dt, ok := schemaTypes[typ]
		if !ok {
			return nil, fmt.Errorf("schema entry %q: unknown type %q (types: %s)", part, typ, schemaTypeList)
		}
		if seen[name] {
			return nil, fmt.Errorf("schema: column %q appears twice", name)
		}
		seen[name] = true
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: nullable})
	}
	return arrow.NewSchema(fields, nil), nil
}

func (a *app) createCommand() *cobra.Command {
	var spec string
	var codec codecFlags
	cmd := &cobra.Command{
		Use:   "create TABLE --schema 'name:type,...' [--compression zstd|lz4|none]",
		Short: "Create an empty table",
		Long: `Create an empty table (version 1) and publish it.

Types: ` + schemaTypeList + `. Columns are nullable; append "!" to a type
for a non-nullable column (id:int64!).

--compression and --compression-level choose how the table's data files are stored
(the configuration keys ` + engine.ConfigCompression + ` and ` + engine.ConfigCompressionLevel + `;
'shale config' shows and changes them later). ` + codecTradeoff + `
With either flag the table is created with that configuration in its version 1. Bad
values are refused before anything is written.`,
		Example: `  shale create trips --schema 'id:int64!,city:string,fare:float64,at:timestamp[us]'
  shale create events --schema 'id:int64!,kind:string' --compression lz4`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			schema, err := parseSchema(spec)
			if err != nil {
				return &usageError{err}
			}
			cfg, err := codec.config(cmd.Flags())
			if err != nil {
				return err
			}
			if err := checkTableName(args[0]); err != nil {
				return err
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			start := time.Now()
			t, err := db.CreateTable(cmd.Context(), args[0], schema, engine.WithConfig(cfg))
			if err != nil {
				return err
			}
			if a.jsonOut {
				out := map[string]any{"table": t.Name(), "version": t.Version(), "schema": schemaJSON(t.Schema())}
				if cfg != nil {
					out["config"] = t.Config()
				}
				return a.printJSON(out)
			}
			if cfg != nil {
				a.printf("Created table %s (version %d, %s, %s) in %s\n", t.Name(), t.Version(), plural(schema.NumFields(), "column"),
					configString(cfg), seconds(time.Since(start)))
				return nil
			}
			a.printf("Created table %s (version %d, %s) in %s\n", t.Name(), t.Version(), plural(schema.NumFields(), "column"), seconds(time.Since(start)))
			return nil
		},
	}
	cmd.Flags().StringVar(&spec, "schema", "", "columns as name:type,... (required)")
	cmd.MarkFlagRequired("schema")
	codec.register(cmd.Flags())
	return cmd
}

// columnJSON describes one column in JSON output.
type columnJSON struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
	FieldID  *int32 `json:"field_id,omitempty"`
}

func schemaJSON(s *arrow.Schema) []columnJSON {
	out := make([]columnJSON, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = columnJSON{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable}
	}
	return out
}
