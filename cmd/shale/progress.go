package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// plainProgressEvery is the interval between plain progress lines (stderr not a terminal).
const plainProgressEvery = 2 * time.Second

// progress reports an import's progress on stderr: a progress bar when stderr is a
// terminal, otherwise a plain line every plainProgressEvery.
type progress struct {
	w         io.Writer
	label     string
	totalRows int64 // > 0: the bar counts rows
	totalSize int64 // bytes of the input, for byte-based progress
	bar       *progressbar.ProgressBar
	start     time.Time
	lastLine  time.Time
}

// isTerminal reports whether w is a terminal. /dev/null is a character device too, but
// not a terminal (isatty: the terminal ioctl fails on it).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer, label string, totalRows, totalSize int64) *progress {
	p := &progress{w: w, label: label, totalRows: totalRows, totalSize: totalSize, start: time.Now()}
	p.lastLine = p.start
	if isTerminal(w) {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
		}
		switch {
		case totalRows <= 0 && totalSize <= 0: // standard input: the size is unknown
			p.bar = progressbar.NewOptions64(-1, opts...)
		case totalRows > 0:
			p.bar = progressbar.NewOptions64(totalRows, append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"))...)
		default:
			p.bar = progressbar.NewOptions64(totalSize, append(opts, progressbar.OptionShowBytes(true))...)
		}
	}
	return p
}

// update records rows imported and bytes read so far.
func (p *progress) update(rows, bytes int64) {
	if p.bar != nil {
		if p.totalRows > 0 {
			p.bar.Set64(min(rows, p.totalRows))
		} else if p.totalSize > 0 {
			p.bar.Set64(min(bytes, p.totalSize))
			p.bar.Describe(fmt.Sprintf("%s (%s)", p.label, plural(rows, "row")))
		} else { // standard input: a spinner with the bytes read
			p.bar.Set64(bytes)
			p.bar.Describe(fmt.Sprintf("%s (%s)", p.label, plural(rows, "row")))
		}
		return
	}
	now := time.Now()
	if now.Sub(p.lastLine) < plainProgressEvery {
		return
	}
	p.lastLine = now
	pct := -1.0
	switch {
	case p.totalRows > 0:
		pct = 100 * float64(rows) / float64(p.totalRows)
	case p.totalSize > 0:
		pct = 100 * float64(min(bytes, p.totalSize)) / float64(p.totalSize)
	}
	if pct < 0 { // standard input: the size is unknown
		fmt.Fprintf(p.w, "%s: %s, %s\n", p.label, plural(rows, "row"), seconds(now.Sub(p.start)))
		return
	}
	fmt.Fprintf(p.w, "%s: %s (%.0f%%), %s\n", p.label, plural(rows, "row"), pct, seconds(now.Sub(p.start)))
}

// finish removes the bar.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
	}
}

// progressReader counts the rows passing through a reader and reports them. It turns a
// panic inside the input reader (arrow readers panic on some malformed inputs) into an
// error naming the input.
type progressReader struct {
	array.RecordReader
	src  *source
	p    *progress
	rows int64
	err  error
}

func (r *progressReader) Next() (ok bool) {
	if r.err != nil {
		return false
	}
	defer func() {
		if v := recover(); v != nil {
			r.err = fmt.Errorf("%w %s as %s%s: %v", ErrInput, r.src.path, r.src.format, r.after(), v)
			ok = false
		}
	}()
	if !r.RecordReader.Next() {
		return false
	}
	r.rows += r.RecordReader.RecordBatch().NumRows()
	if r.p != nil {
		r.p.update(r.rows, r.src.bytesRead())
	}
	return true
}

func (r *progressReader) Err() error {
	if r.err != nil {
		return r.err
	}
	err := r.RecordReader.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInput):
		return err // the reader named the place itself (CSV: line and column)
	}
	return fmt.Errorf("%w %s as %s%s: %v", ErrInput, r.src.path, r.src.format, r.after(), err)
}

// after says how far the input was read before a failure: " after 65,536 rows" (the
// rows of the batches read whole; the failure is in a later one), or "".
func (r *progressReader) after() string {
	if r.rows == 0 {
		return ""
	}
	return " after " + plural(r.rows, "row")
}

func (r *progressReader) RecordBatch() arrow.RecordBatch { return r.RecordReader.RecordBatch() }
