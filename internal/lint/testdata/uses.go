package uses

import (
	"context"
	"log/slog"
	"net/http"
)

func logs(ctx context.Context, log *slog.Logger, w http.ResponseWriter, err error) {
	log.Warn("a", "error", err)                                       // banned: line 10
	log.Info("b", "err", err, "state", "error")                       // a value, not a key
	log.With("job", "web").Error("c", slog.Int("n", 1), "error", err) // banned: line 12
	slog.ErrorContext(ctx, "d", "error", err)                         // banned: line 13
	log.Log(ctx, slog.LevelWarn, "e", slog.Any("error", err))         // banned: line 14
	http.Error(w, "error", http.StatusInternalServerError)            // not slog
	log.Info("error")                                                 // a message, not a key
}
