package docker

// LateOOMWait is lateOOMWait, for the external tests.
const LateOOMWait = lateOOMWait
