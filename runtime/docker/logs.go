package docker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/pkg/stdcopy"
)

// RotatingFile is an append-only log file rotated by size: when a write
// would take the current file past MaxBytes, the file becomes path.1 (path.1
// becomes path.2, and so on) and a new file is started; at most MaxFiles
// rotated files are kept. A single write is never split across files.
type RotatingFile struct {
	mu       sync.Mutex
	path     string
	maxBytes int64
	maxFiles int
	f        *os.File
	size     int64
}

// OpenRotating opens (appending) or creates path. maxBytes <= 0 disables
// rotation; maxFiles < 0 is taken as 0 (rotation discards the old file).
func OpenRotating(path string, maxBytes int64, maxFiles int) (*RotatingFile, error) {
	if maxFiles < 0 {
		maxFiles = 0
	}
	r := &RotatingFile{path: path, maxBytes: maxBytes, maxFiles: maxFiles}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *RotatingFile) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening log file: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Write appends p, rotating first if p does not fit.
func (r *RotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, os.ErrClosed
	}
	if r.maxBytes > 0 && r.size > 0 && r.size+int64(len(p)) > r.maxBytes {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

func (r *RotatingFile) rotate() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("rotating log file: %w", err)
	}
	r.f = nil
	if r.maxFiles == 0 {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotating log file: %w", err)
		}
	} else {
		for i := r.maxFiles - 1; i >= 1; i-- {
			from := r.path + "." + strconv.Itoa(i)
			if err := os.Rename(from, r.path+"."+strconv.Itoa(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("rotating log file: %w", err)
			}
		}
		if err := os.Rename(r.path, r.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotating log file: %w", err)
		}
	}
	return r.open()
}

// Close closes the current file.
func (r *RotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// LogPosition remembers the timestamp of the last log entry copied, in a
// small file, so that a streamer started later (after the plugin or the host
// restarted) resumes after it instead of copying the log again.
type LogPosition struct {
	mu   sync.Mutex
	f    *os.File
	last time.Time
}

// posWidth is the fixed size of the position record: a fixed-width record
// is rewritten in place with one pwrite, never truncated.
const posWidth = 40

// OpenLogPosition opens or creates the position file at path and reads the
// position it holds (zero for a new file).
func OpenLogPosition(path string) (*LogPosition, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log position: %w", err)
	}
	buf := make([]byte, posWidth)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("reading log position: %w", err)
	}
	p := &LogPosition{f: f}
	if s := strings.TrimSpace(string(buf[:n])); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading log position %s: %w", path, err)
		}
		p.last = t
	}
	return p, nil
}

// Last is the timestamp of the last entry copied (zero: none).
func (p *LogPosition) Last() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *LogPosition) advance(t time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !t.After(p.last) {
		return nil
	}
	p.last = t
	rec := []byte(fmt.Sprintf("%-*s", posWidth-1, t.UTC().Format(time.RFC3339Nano)) + "\n")
	if _, err := p.f.WriteAt(rec, 0); err != nil {
		return fmt.Errorf("recording log position: %w", err)
	}
	return nil
}

// Close closes the position file.
func (p *LogPosition) Close() error { return p.f.Close() }

// CopyLogs demultiplexes a log stream opened by ContainerLogs into stdout
// and stderr, stripping the engine's timestamps. Entries stamped at or
// before pos.Last() are skipped (the stream's `since` bound is inclusive);
// after each entry is written its timestamp is recorded in pos. It returns
// when the stream ends (nil) or fails.
//
// Duplication is bounded to the entry being written when the process dies
// between writing it and recording its position. Entries of stdout and
// stderr stamped within the same nanosecond as the last recorded one are
// taken as already copied.
func CopyLogs(stream io.Reader, stdout, stderr io.Writer, pos *LogPosition) error {
	skipUpTo := pos.Last()
	mk := func(w io.Writer) io.Writer {
		return &stampedWriter{w: w, pos: pos, skipUpTo: skipUpTo}
	}
	_, err := stdcopy.StdCopy(mk(stdout), mk(stderr), stream)
	if err != nil {
		return fmt.Errorf("copying container logs: %w", err)
	}
	return nil
}

// stampedWriter receives one log entry per Write ("<RFC3339Nano> <text>"):
// stdcopy writes each frame of the stream in one call, and the engine sends
// each entry in one frame.
type stampedWriter struct {
	w        io.Writer
	pos      *LogPosition
	skipUpTo time.Time
}

func (s *stampedWriter) Write(p []byte) (int, error) {
	sp := bytes.IndexByte(p, ' ')
	if sp <= 0 {
		// Not stamped (never expected): copy it as is.
		return s.w.Write(p)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(p[:sp]))
	if err != nil {
		return s.w.Write(p)
	}
	if !s.skipUpTo.IsZero() && !ts.After(s.skipUpTo) {
		return len(p), nil
	}
	if _, err := s.w.Write(p[sp+1:]); err != nil {
		return 0, err
	}
	if err := s.pos.advance(ts); err != nil {
		return 0, err
	}
	return len(p), nil
}
