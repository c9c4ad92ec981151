package driver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// ProtocolVersion is the version of the driver plugin protocol this package
// speaks. A host refuses a plugin speaking another version. It changes only
// when the protocol breaks; adding fields or RPCs does not change it.
const ProtocolVersion = 1

// PluginName is the name under which a driver is dispensed by go-plugin.
const PluginName = "driver"

// EnvLogFile names the environment variable through which the host tells a
// plugin which file to log to. A plugin that outlives the host that started
// it must never write to that host's stderr (it would die of SIGPIPE), so
// Serve points the plugin's stderr, its slog default and go-plugin's own
// logger at this file.
const EnvLogFile = "HIVELET_PLUGIN_LOG"

// Handshake returns the go-plugin handshake of the driver protocol. The
// magic cookie only stops a plugin binary from being run by hand by mistake;
// it is not a security feature.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   "HIVELET_DRIVER_PLUGIN",
		MagicCookieValue: "4e0c7d1a-hivelet-driver",
	}
}

// PluginSet is the go-plugin plugin set of a driver: one entry, PluginName.
// Hosts pass PluginSet(nil) (they only need the client half).
func PluginSet(impl Driver) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &grpcPlugin{impl: impl}}
}

// grpcPlugin carries a Driver over go-plugin's gRPC transport.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Driver
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return fmt.Errorf("serving driver plugin: no implementation")
	}
	driverpb.RegisterDriverServer(s, &server{impl: p.impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

// NewClient returns a Driver that calls a driver plugin over conn. The
// plugin manager gets one from go-plugin; it is exported for hosts and tests
// that manage the connection themselves.
func NewClient(conn grpc.ClientConnInterface) Driver {
	return &client{rpc: driverpb.NewDriverClient(conn)}
}

// Serve runs impl as a driver plugin and returns when the host kills the
// plugin. It is the whole main function of a driver binary:
//
//	func main() { driver.Serve(&myDriver{}) }
//
// Serve ignores SIGPIPE and, when the host names a log file in EnvLogFile,
// sends stderr (and so panics), slog's default logger and go-plugin's
// logger there, so the plugin survives the host that started it. Nothing
// may be written to stdout before Serve: stdout carries the handshake.
func Serve(impl Driver) {
	signal.Ignore(syscall.SIGPIPE)
	logOut := os.Stderr
	if path := os.Getenv(EnvLogFile); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hivelet driver plugin: opening log file %s: %v\n", path, err)
			os.Exit(1)
		}
		// Panics and anything else written to fd 2 land in the file too.
		if err := unix.Dup3(int(f.Fd()), 2, 0); err != nil {
			fmt.Fprintf(os.Stderr, "hivelet driver plugin: redirecting stderr to %s: %v\n", path, err)
			os.Exit(1)
		}
		logOut = f
	}
	slog.SetDefault(slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug})))
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake(),
		Plugins:         PluginSet(impl),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "go-plugin",
			Output:     logOut,
			Level:      hclog.Info,
			JSONFormat: true,
		}),
	})
}
