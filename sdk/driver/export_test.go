package driver

import "google.golang.org/grpc/metadata"

// For the external tests' stand-in of a plugin built with an older SDK.
var ErrorStatusForTest = errToStatus

func AcceptHeaderForTest() metadata.MD { return metadata.Pairs(acceptedHeader, "1") }
