package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/fleet"
)

// embeddedConfig is the agent's embedded NATS server as configured
// (nats.embedded, docs/agent-config.md). A cluster member without a
// configured server_name is named after the node ID: names must differ
// across members, and the ID is as stable as the state directory holding
// both it and the JetStream store.
func embeddedConfig(rc *config.Resolved, nodeID string, dev bool, log *slog.Logger) fleet.EmbeddedConfig {
	ec := fleet.EmbeddedConfig{
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
func waitEmbeddedJetStream(ctx context.Context, emb *fleet.Embedded, rc *config.Resolved, log *slog.Logger) error {
	if rc.Cluster == nil {
		return nil
	}
	if err := emb.WaitJetStream(ctx, rc.Replicas); err != nil {
		return fmt.Errorf("embedded NATS cluster %s: %w", rc.Cluster.Name, err)
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{InProcess: emb.Server(), RequestTimeout: rc.RequestTimeout}, log, nil)
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
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded NATS cluster %s: creating buckets: %w (last: %v)", rc.Cluster.Name, ctx.Err(), err)
		case <-time.After(min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)):
		}
	}
}
