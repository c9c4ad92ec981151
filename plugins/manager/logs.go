package manager

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hivelet/hivelet/internal/wait"
)

// tailLog follows a plugin's log file from offset and re-emits each line
// into logger (which carries the plugin's name) until ctx ends. A plugin
// writes JSON lines (slog's or go-hclog's format, see driver.Serve); their
// level and message are kept and their other keys become attributes. Any
// other line is logged as-is at INFO.
func tailLog(ctx context.Context, path string, offset int64, logger *slog.Logger, every time.Duration) {
	var last os.FileInfo
	if fi, err := os.Stat(path); err == nil {
		last = fi
	}
	for {
		if f, err := os.Open(path); err == nil {
			if fi, err := f.Stat(); err == nil {
				if fi.Size() < offset || (last != nil && !os.SameFile(fi, last)) {
					offset = 0 // truncated, or rotated at a relaunch
				}
				last = fi
			}
			if _, err := f.Seek(offset, io.SeekStart); err == nil {
				r := bufio.NewReader(f)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						break // an incomplete last line is read again next time
					}
					offset += int64(len(line))
					emitLine(ctx, logger, bytes.TrimRight(line, "\r\n"))
				}
			}
			f.Close()
		}
		if !wait.For(ctx, every) {
			return
		}
	}
}

var levelNames = map[string]slog.Level{
	"trace": slog.LevelDebug - 4, "debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError,
}

func emitLine(ctx context.Context, logger *slog.Logger, line []byte) {
	if len(line) == 0 {
		return
	}
	var m map[string]any
	if line[0] != '{' || json.Unmarshal(line, &m) != nil {
		logger.Log(ctx, slog.LevelInfo, string(line))
		return
	}
	level, msg := slog.LevelInfo, ""
	for _, k := range []string{"level", "@level"} {
		if s, ok := m[k].(string); ok {
			if l, ok := levelNames[strings.ToLower(s)]; ok {
				level = l
			}
			delete(m, k)
		}
	}
	for _, k := range []string{"msg", "@message"} {
		if s, ok := m[k].(string); ok {
			msg = s
			delete(m, k)
		}
	}
	delete(m, "time")
	delete(m, "@timestamp")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		attrs = append(attrs, strings.TrimPrefix(k, "@"), m[k])
	}
	logger.Log(ctx, level, msg, attrs...)
}

// hclogWriter turns go-plugin's own (host-side) log lines into slog records.
type hclogWriter struct{ logger *slog.Logger }

func (w hclogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		emitLine(context.Background(), w.logger, line)
	}
	return len(p), nil
}

// maxLogSize is the size past which a plugin's log file is rotated (to
// NAME.log.1, replacing the previous one) when the plugin is launched. A
// running plugin keeps its file open, so rotation happens only then.
const maxLogSize = 16 << 20

func rotateLog(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < maxLogSize {
		return nil
	}
	return os.Rename(path, path+".1")
}
