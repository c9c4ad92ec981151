package main

import (
	"context"
	"fmt"
	"log/slog"

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
// can hold the configured replicas (the buckets are created next); it waits
// as long as the agent runs, logging while the other members are missing.
func waitEmbeddedJetStream(ctx context.Context, emb *fleet.Embedded, rc *config.Resolved) error {
	if rc.Cluster == nil {
		return nil
	}
	if err := emb.WaitJetStream(ctx, rc.Replicas); err != nil {
		return fmt.Errorf("embedded NATS cluster %s: %w", rc.Cluster.Name, err)
	}
	return nil
}
