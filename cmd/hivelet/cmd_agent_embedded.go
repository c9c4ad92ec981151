package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/internal/wait"
)

// embeddedConfig is the agent's embedded NATS server as configured
// (nats.embedded, docs/agent-config.md). A cluster member without a
// configured server_name is named after the node ID: names must differ
// across members, and the ID is as stable as the state directory holding
// both it and the JetStream store.
func embeddedConfig(rc *config.Resolved, nodeID, token string, dev bool, log *slog.Logger) fleet.EmbeddedConfig {
	ec := fleet.EmbeddedConfig{
		Token:              token,
		StoreDir:           rc.EmbeddedStoreDir,
		Host:               rc.EmbeddedHost,
		Port:               rc.EmbeddedPort,
		FallbackRandomPort: dev,
		ServerName:         rc.EmbeddedServerName,
		AllowNonLoopback:   rc.EmbeddedAllowNonLoopback,
		Log:                log,
	}
	if c := rc.Cluster; c != nil {
		ec.Cluster = &fleet.ClusterConfig{Name: c.Name, Host: c.Host, Port: c.Port, Routes: c.Routes}
		if ec.ServerName == "" {
			ec.ServerName = "hivelet-" + nodeID
		}
	}
	return ec
}

// waitEmbeddedJetStream holds a cluster member until its JetStream cluster
// can hold the configured replicas and the fleet's buckets exist: it waits
// as long as the agent runs, logging while the other members are missing.
// Members starting together create the same R3 buckets at once, and a
// just-formed cluster may still be electing stream leaders, so a failed
// bucket request is retried here rather than ending the agent's start.
func waitEmbeddedJetStream(ctx context.Context, emb *fleet.Embedded, rc *config.Resolved, token string, log *slog.Logger) error {
	if rc.Cluster == nil {
		return nil
	}
	if err := emb.WaitJetStream(ctx, rc.Replicas); err != nil {
		return fmt.Errorf("embedded NATS cluster %s: %w", rc.Cluster.Name, err)
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{InProcess: emb.Server(), Token: token, RequestTimeout: rc.RequestTimeout}, log, nil)
	if err != nil {
		return fmt.Errorf("embedded NATS cluster %s: %w", rc.Cluster.Name, err)
	}
	defer conn.Close()
	for attempt := 1; ; attempt++ {
		_, err := fleet.EnsureBuckets(ctx, conn, fleet.Names(rc.BucketPrefix), fleet.BucketOptions{Replicas: rc.Replicas, NodeTTL: rc.NodeTTL})
		if err == nil {
			return nil
		}
		log.Warn("creating the fleet buckets in the new cluster; retrying", "attempt", attempt, "err", err)
		if !wait.For(ctx, min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)) {
			return fmt.Errorf("embedded NATS cluster %s: creating buckets: %w (last: %v)", rc.Cluster.Name, ctx.Err(), err)
		}
	}
}

// embeddedToken is the token the embedded server requires: generated at
// the first start and kept in the state directory (fleet.LoadOrCreateToken),
// or none when nats.embedded.insecure_no_auth says so, with a warning at
// every start.
func embeddedToken(rc *config.Resolved, log *slog.Logger) (string, error) {
	if rc.EmbeddedNoAuth {
		log.Warn("the embedded NATS server accepts clients WITHOUT credentials (nats.embedded.insecure_no_auth): anyone who can reach it can declare jobs and run commands through exec tasks")
		return "", nil
	}
	token, path, err := fleet.LoadOrCreateToken(rc.StateDir)
	if err != nil {
		return "", err
	}
	log.Info("embedded NATS server requires credentials", "token_file", path)
	return token, nil
}

// publishToken copies the token where this user's CLI finds it for the
// server's port (fleet.FindToken); the returned function removes it.
func publishToken(emb *fleet.Embedded, token string, log *slog.Logger) func() {
	if token == "" {
		return func() {}
	}
	path, unpublish, err := fleet.PublishToken(emb.Port(), token)
	if err != nil {
		log.Warn("the CLI will not find the NATS credentials by itself: pass --nats-token-file", "err", err)
		return unpublish
	}
	log.Info("NATS credentials published for the CLI", "path", path)
	return unpublish
}
