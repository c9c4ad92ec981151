package fleet

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// LiveAllocKeys lists the keys of this node's allocations in the
// allocations bucket that are not terminal: the fleet's memory of what the
// node runs, read at boot when the node's own store holds nothing
// (state.LostState). A value that cannot be decoded counts as live: it
// may be one.
func (w *NodeWriter) LiveAllocKeys(ctx context.Context) ([]string, error) {
	kv := w.s.Allocs
	if kv == nil {
		return nil, ErrNoBucket
	}
	rctx, cancel := w.s.conn.withTimeout(ctx)
	defer cancel()
	lister, err := kv.ListKeysFiltered(rctx, wanted.AllocKeyPrefix(w.nodeID))
	if err != nil {
		return nil, fmt.Errorf("listing the allocations of node %s: %w", w.nodeID, err)
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var live []string
	for _, k := range keys {
		e, err := w.s.get(ctx, kv, k)
		if err == ErrNotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading allocation %s: %w", k, err)
		}
		var a model.Allocation
		if json.Unmarshal(e.Value(), &a) != nil || !a.Terminal() {
			live = append(live, k)
		}
	}
	return live, nil
}
