package exec

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// DefaultUser is the user an exec task runs as when it names none and the
// driver runs as root, as Nomad's exec driver does: a task that can be
// declared by anyone who can write a job must not get root by omission.
const DefaultUser = "nobody"

// nobodyID is the uid and gid a task naming no user gets where the system
// has no DefaultUser entry (a FROM scratch image): 65534, nobody's and
// nogroup's on Linux distributions.
const nobodyID = 65534

// EnvAllowRoot is the variable the agent sets, from exec.allow_root in its
// configuration, when it launches the exec plugin: "true" lets a task that
// says user = "root" (any user of uid 0) run as root. Anything else, or
// unset, refuses it.
const EnvAllowRoot = "HIVELET_EXEC_ALLOW_ROOT"

// Options are what the agent's configuration decides for the driver.
type Options struct {
	// AllowRoot lets a task that names a user of uid 0 run as it.
	AllowRoot bool
	// AgentUser runs a task that names no user as the driver's own user
	// (raw_exec, which the agent's configuration must enable).
	AgentUser bool
}

// OptionsFromEnv reads Options from getenv (os.Getenv in the plugin); a
// malformed value is an error naming the variable.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	var o Options
	if v := getenv(EnvAllowRoot); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("%s=%q: want true or false", EnvAllowRoot, v)
		}
		o.AllowRoot = b
	}
	return o, nil
}

// NewFromEnv is the built-in registry's constructor: the driver with
// OptionsFromEnv(os.Getenv).
func NewFromEnv() (*Driver, error) {
	o, err := OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuring the exec driver: %w", err)
	}
	return NewWithOptions(o), nil
}

// taskCredential decides whom a task runs as: nil is the driver's own user
// (a driver not running as root cannot switch users, so its tasks are its
// user's; raw_exec's by design). A user of uid 0 needs AllowRoot.
func (d *Driver) taskCredential(name string) (*syscall.Credential, error) {
	cfgDefault := name == ""
	if cfgDefault {
		if d.opts.AgentUser || os.Geteuid() != 0 {
			return nil, nil
		}
		name = DefaultUser
	}
	cred, err := credential(name)
	if err != nil && name == DefaultUser && cfgDefault {
		// No passwd entry (a scratch image): nobody's conventional ids.
		cred, err = &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	if cred.Uid == 0 && !d.opts.AllowRoot {
		return nil, fmt.Errorf("user %q is root: the agent's configuration does not allow exec tasks to run as root (exec { allow_root = true })", name)
	}
	return cred, nil
}

// credential looks a user up by name; its supplementary groups are not
// kept (an empty Groups makes the child drop the driver's).
func credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// prepareDirs lets a task running as cred use its directories the way
// Nomad's do: the task directory (local/, secrets/, what an artifact or a
// template put there) becomes the task user's, and the allocation
// directory, shared by the group's tasks ($NOMAD_ALLOC_DIR), becomes
// writable by all with the sticky bit, so no task removes what it does not
// own (the logs, the other tasks' directories).
func prepareDirs(allocDir, taskName string, cred *syscall.Credential) error {
	if allocDir == "" {
		return nil
	}
	if taskName != "" {
		taskDir := filepath.Join(allocDir, taskName)
		err := filepath.WalkDir(taskDir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(cred.Uid), int(cred.Gid))
		})
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("giving the task directory to uid %d: %w", cred.Uid, err)
		}
	}
	fi, err := os.Stat(allocDir)
	if err != nil {
		return fmt.Errorf("allocation directory: %w", err)
	}
	if fi.Mode().Perm() != 0o777 || fi.Mode()&fs.ModeSticky == 0 {
		if err := os.Chmod(allocDir, 0o777|fs.ModeSticky); err != nil {
			return fmt.Errorf("sharing the allocation directory: %w", err)
		}
	}
	return nil
}
