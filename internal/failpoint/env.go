package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvVar is the environment variable whose spec (see ParseSpec) is enabled when this
// package initialises, so a test can set up seams in a child process it starts. A bad
// spec makes the process print the error to stderr and exit with status 2 at start-up:
// a spec silently ignored would let a crash test pass without crashing.
const EnvVar = "SHALE_FAILPOINTS"

func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		if _, err := EnableSpec(spec); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", EnvVar, err)
			os.Exit(2)
		}
	}
}

// Entry is one seam name and the action a spec enables there.
type Entry struct {
	Name   string
	Action Action
}

// SpecError describes a spec that ParseSpec rejects: the offending entry and why.
type SpecError struct {
	Entry  string
	Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("failpoint: bad spec entry %q: %s", e.Entry, e.Reason)
}

const actionSyntax = "count, kill, exit(code), panic[(msg)], error[(msg)], sleep(duration), block(path)"

// ParseSpec parses a failpoint spec, the syntax of SHALE_FAILPOINTS:
//
//	spec     = entry { ";" entry }           (blank entries are skipped)
//	entry    = name "=" term                  (name: letters, digits, . _ - /)
//	term     = { modifier "->" } [ N "*" ] action
//	modifier = "after(" N ")"                 let the first N hits pass (Action.After)
//	         | "times(" N ")" | "once"         take effect on N hits / one hit (Action.Times)
//	action   = "count"                        Count
//	         | "kill"                         Kill (SIGKILL self)
//	         | "exit(" code ")"               Exit
//	         | "panic" [ "(" msg ")" ]        Panic
//	         | "error" [ "(" msg ")" ]        Error(errors.New(msg)); msg defaults to "injected error"
//	         | "sleep(" duration ")"          Sleep; a Go duration such as 50ms
//	         | "block(" path ")"              BlockUntilFile
//
// "N*action" is "times(N)->action". Examples: "a.b=kill", "a.b=after(2)->kill" (kill at
// the third hit), "a.b=2*error(disk full)" (fail twice, then pass), "x=sleep(50ms);y=count".
// Arguments cannot contain ';'. A name may appear once. Errors are *SpecError.
func ParseSpec(spec string) ([]Entry, error) {
	var out []Entry
	seen := map[string]bool{}
	for _, raw := range strings.Split(spec, ";") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			continue
		}
		name, term, ok := strings.Cut(entry, "=")
		name, term = strings.TrimSpace(name), strings.TrimSpace(term)
		if !ok {
			return nil, &SpecError{entry, "want name=action"}
		}
		if err := checkName(name); err != nil {
			return nil, &SpecError{entry, err.Error()}
		}
		if seen[name] {
			return nil, &SpecError{entry, fmt.Sprintf("seam %q appears twice", name)}
		}
		seen[name] = true
		a, reason := parseTerm(term)
		if reason != "" {
			return nil, &SpecError{entry, reason}
		}
		out = append(out, Entry{Name: name, Action: a})
	}
	return out, nil
}

// EnableSpec parses spec (see ParseSpec) and enables every entry; nothing is enabled when
// it fails. disable undoes all of them. Errors are *SpecError.
func EnableSpec(spec string) (disable func(), err error) {
	entries, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	offs := make([]func(), len(entries))
	for i, e := range entries {
		offs[i] = Enable(e.Name, e.Action)
	}
	return func() {
		for _, off := range offs {
			off()
		}
	}, nil
}

// parseTerm parses modifiers and an action; a non-empty reason means the term is bad.
func parseTerm(term string) (Action, string) {
	after, times := -1, -1
modifiers:
	for {
		head, rest, ok := strings.Cut(term, "->")
		if !ok {
			break
		}
		head = strings.TrimSpace(head)
		var word, arg string
		switch {
		case head == "once":
			word = "once"
		case (strings.HasPrefix(head, "after(") || strings.HasPrefix(head, "times(")) && strings.HasSuffix(head, ")"):
			word, arg = head[:5], head[6:len(head)-1]
		default:
			break modifiers // not a modifier: the "->" belongs to the action's argument
		}
		if word == "after" {
			if after >= 0 {
				return Action{}, "after(N) given twice"
			}
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 {
				return Action{}, fmt.Sprintf("after(%s): want a count ≥ 0", arg)
			}
			after = n
		} else {
			if times >= 0 {
				return Action{}, "more than one of once, times(N), N*"
			}
			n := 1
			if word == "times" {
				var err error
				if n, err = strconv.Atoi(arg); err != nil || n < 1 {
					return Action{}, fmt.Sprintf("times(%s): want a count ≥ 1", arg)
				}
			}
			times = n
		}
		term = strings.TrimSpace(rest)
	}
	if i := strings.IndexByte(term, '*'); i > 0 && !strings.ContainsRune(term[:i], '(') {
		n, err := strconv.Atoi(strings.TrimSpace(term[:i]))
		if err != nil || n < 1 {
			return Action{}, fmt.Sprintf("%q before '*': want a count ≥ 1", term[:i])
		}
		if times >= 0 {
			return Action{}, "more than one of once, times(N), N*"
		}
		times = n
		term = strings.TrimSpace(term[i+1:])
	}
	a, reason := parseAction(term)
	if reason != "" {
		return Action{}, reason
	}
	if after > 0 {
		a = a.After(after)
	}
	if times > 0 {
		a = a.Times(times)
	}
	return a, ""
}

func parseAction(term string) (Action, string) {
	word, arg, hasArg, reason := splitCall(term)
	if reason != "" {
		return Action{}, reason
	}
	needArg := func(what string) string {
		if !hasArg || arg == "" {
			return fmt.Sprintf("%s needs an argument: %s(%s)", word, word, what)
		}
		return ""
	}
	noArg := func() string {
		if hasArg {
			return fmt.Sprintf("%s takes no argument", word)
		}
		return ""
	}
	switch word {
	case "count":
		return Count(), noArg()
	case "kill":
		return Kill(), noArg()
	case "exit":
		if r := needArg("code"); r != "" {
			return Action{}, r
		}
		code, err := strconv.Atoi(arg)
		if err != nil || code < 0 || code > 255 {
			return Action{}, fmt.Sprintf("exit(%s): want a status code 0-255", arg)
		}
		return Exit(code), ""
	case "panic":
		return Panic(arg), ""
	case "error":
		if arg == "" {
			arg = "injected error"
		}
		return Error(injectedError(arg)), ""
	case "sleep":
		if r := needArg("duration"); r != "" {
			return Action{}, r
		}
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return Action{}, fmt.Sprintf("sleep(%s): want a Go duration such as 50ms", arg)
		}
		return Sleep(d), ""
	case "block":
		if r := needArg("path"); r != "" {
			return Action{}, r
		}
		return BlockUntilFile(arg), ""
	case "":
		return Action{}, "missing action (want " + actionSyntax + ")"
	}
	return Action{}, fmt.Sprintf("unknown action %q (want %s)", word, actionSyntax)
}

// splitCall splits "word(arg)" or "word"; the argument runs to the term's last ')'.
func splitCall(s string) (word, arg string, hasArg bool, reason string) {
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return strings.TrimSpace(s), "", false, ""
	}
	if !strings.HasSuffix(s, ")") {
		return "", "", false, fmt.Sprintf("%q: missing ')' at the end", s)
	}
	return strings.TrimSpace(s[:open]), s[open+1 : len(s)-1], true, ""
}

// injectedError is the error of an "error(msg)" spec entry: its text is msg.
type injectedError string

func (e injectedError) Error() string { return string(e) }
