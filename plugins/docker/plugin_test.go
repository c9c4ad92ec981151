package docker_test

import (
	"os"

	docker "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// servePluginIfAsked makes the test binary serve the docker driver when the
// plugin manager re-executes it as `<binary> plugin serve docker`, as it
// re-executes the hivelet binary in production.
func servePluginIfAsked() bool {
	if len(os.Args) < 4 || os.Args[1] != "plugin" || os.Args[2] != "serve" || os.Args[3] != docker.Name {
		return false
	}
	d, err := docker.New(docker.Config{})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	driver.Serve(d)
	return true
}
