package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
)

// stdinPath is the FILE argument of `shale import` that reads standard input.
const stdinPath = "-"

// stdinName is how messages name standard input.
const stdinName = "stdin"

// stdinInput is standard input prepared for a source: a file when it can seek (stdin
// redirected from a regular file, or spooled to a temporary file because the format needs
// random access), else a stream.
type stdinInput struct {
	file    *os.File      // nil for a stream
	stream  *bufio.Reader // nil for a file
	cleanup func()        // removes a spool file
}

// openStdin prepares standard input for format. CSV, TSV, JSON Lines and Arrow IPC
// streams are read as a stream (memory stays bounded: only the inference sample is kept
// to be read again). Parquet and the Arrow IPC file format need random access (their
// footer comes last), so a pipe is first copied to a temporary file in $TMPDIR, removed
// when the import ends.
func openStdin(format string) (*stdinInput, error) {
	in := os.Stdin
	if st, err := in.Stat(); err == nil && st.Mode().IsRegular() {
		return &stdinInput{file: in, cleanup: func() {}}, nil
	}
	br := bufio.NewReaderSize(in, 1<<20)
	switch format {
	case formatParquet:
		return spoolStdin(br)
	case formatArrow:
		magic, err := br.Peek(6)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%w %s: %v", ErrInput, stdinName, err)
		}
		if string(magic) == "ARROW1" {
			return spoolStdin(br)
		}
	}
	return &stdinInput{stream: br, cleanup: func() {}}, nil
}

// spoolStdin copies r to a temporary file and returns it positioned at its start.
func spoolStdin(r io.Reader) (*stdinInput, error) {
	f, err := os.CreateTemp("", "shale-import-stdin-*")
	if err != nil {
		return nil, fmt.Errorf("spool %s to a temporary file: %w", stdinName, err)
	}
	cleanup := func() {
		f.Close()
		os.Remove(f.Name())
	}
	if _, err := io.Copy(f, r); err != nil {
		cleanup()
		return nil, fmt.Errorf("spool %s to %s: %w", stdinName, f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, fmt.Errorf("spool %s to %s: %w", stdinName, f.Name(), err)
	}
	return &stdinInput{file: f, cleanup: cleanup}, nil
}

// recorder keeps a copy of everything read through it, so that an inference sample read
// from a stream can be read again.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (rc *recorder) Read(p []byte) (int, error) {
	n, err := rc.r.Read(p)
	rc.buf.Write(p[:n])
	return n, err
}

// sampleReader returns the input to read an inference sample from: the file from its
// start (after a byte order mark), or the stream, recorded.
func (s *source) sampleReader() (io.Reader, error) {
	if s.stream == nil {
		if err := s.rewind(); err != nil {
			return nil, err
		}
		return s.file.f, nil
	}
	if head, _ := s.stream.Peek(len(utf8BOM)); bytes.Equal(head, utf8BOM) {
		s.stream.Discard(len(utf8BOM))
	}
	s.sample = &recorder{r: s.stream}
	return s.sample, nil
}

// dataReader returns the input to import from, counting the bytes read: the file from
// its start (after a byte order mark), or, for a stream, the sample read so far followed
// by the rest of the stream.
func (s *source) dataReader() (io.Reader, error) {
	if s.stream == nil {
		if err := s.rewind(); err != nil {
			return nil, err
		}
		return s.file, nil
	}
	var head []byte
	if s.sample != nil {
		head = s.sample.buf.Bytes()
		s.sample = nil
	}
	s.file.r = io.MultiReader(bytes.NewReader(head), s.stream)
	return s.file, nil
}
