package manager_test

import "os/exec"

func osexecCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
