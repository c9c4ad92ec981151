package fleet

// Observer receives the events the fleet layer must make visible as metrics.
// host/api.Metrics implements it; nil means nobody is counting.
type Observer interface {
	// WatchRestarted counts a watcher re-created for bucket: reason is
	// "reconnect" (server restart), "ended" (Updates closed) or "error".
	WatchRestarted(bucket, reason string)
	// DeclarationRejected counts a value that failed to decode.
	DeclarationRejected(bucket, key string)
	// ConnState reports the NATS connection state (see ConnState values).
	ConnState(state ConnState)
}

type nopObserver struct{}

func (nopObserver) WatchRestarted(string, string)      {}
func (nopObserver) DeclarationRejected(string, string) {}
func (nopObserver) ConnState(ConnState)                {}

func observerOr(o Observer) Observer {
	if o == nil {
		return nopObserver{}
	}
	return o
}
