package model

import (
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// ArtifactMode says what an artifact's source is taken to be.
type ArtifactMode string

const (
	// ArtifactAny (the default): an archive is unpacked into the
	// destination directory, any other file is saved there by its name.
	ArtifactAny ArtifactMode = "any"
	// ArtifactFile: the source is saved as the file named by destination.
	ArtifactFile ArtifactMode = "file"
	// ArtifactDir: the source must be an archive, unpacked into destination.
	ArtifactDir ArtifactMode = "dir"
)

// ArtifactModes lists every ArtifactMode value.
var ArtifactModes = []ArtifactMode{ArtifactAny, ArtifactFile, ArtifactDir}

func (m *ArtifactMode) UnmarshalJSON(b []byte) error { return decodeEnum(b, m, ArtifactModes) }

// ArtifactSchemes are the sources an artifact may be fetched from.
var ArtifactSchemes = []string{"http", "https", "file"}

// ArtifactChecksums are the checksum types an artifact's options accept,
// with the length of their hex digest.
var ArtifactChecksums = map[string]int{"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}

// ArchiveFormats are the archive formats an artifact may be unpacked from,
// as the archive option names them.
var ArchiveFormats = []string{"tar", "tar.gz", "tgz", "tar.bz2", "tbz2", "zip"}

// Artifact is a file the node downloads into the task's directory once
// per allocation, before the task first starts (Nomad's artifact block):
// over http(s), or a file:// URL on the node. An archive is unpacked.
type Artifact struct {
	Source string `json:"source"`
	// Destination is relative to the task directory and stays inside it;
	// "" = "local/" (a directory; with mode file, the file's path).
	Destination string       `json:"destination,omitempty"`
	Mode        ArtifactMode `json:"mode,omitempty"`
	// Options: checksum = "sha256:<hex>" (md5, sha1, sha512 too) checks the
	// download; archive = "false" keeps an archive as it is, archive =
	// "tar.gz" (a format of ArchiveFormats) unpacks a file whose name does
	// not say what it is.
	Options map[string]string `json:"options,omitempty"`
	// Headers are sent with an http(s) request.
	Headers map[string]string `json:"headers,omitempty"`
}

// Dest is the artifact's destination with its default.
func (a Artifact) Dest() string {
	if strings.TrimSpace(a.Destination) == "" {
		return "local/"
	}
	return a.Destination
}

// Checksum splits the checksum option into its type and hex digest
// ("" when there is none).
func (a Artifact) Checksum() (typ, digest string) {
	typ, digest, _ = strings.Cut(a.Options["checksum"], ":")
	return strings.ToLower(typ), strings.ToLower(digest)
}

func (v *validator) artifact(path string, a Artifact) {
	u, err := url.Parse(a.Source)
	switch {
	case strings.TrimSpace(a.Source) == "":
		v.add(join(path, "source"), "an artifact needs a source, such as \"https://example.com/app.tar.gz\"")
	case err != nil:
		v.add(join(path, "source"), "source %q is not a URL: %v", a.Source, err)
	case strings.Contains(a.Source, "::") || !slices.Contains(ArtifactSchemes, u.Scheme):
		v.add(join(path, "source"), "source %q: hivelet fetches artifacts over http, https and file:// only (no git, s3, gcs or hg getters)", a.Source)
	case u.Scheme == "file" && ((u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path)):
		v.add(join(path, "source"), "source %q: a file source names an absolute path on the node, file:///path", a.Source)
	}
	d := a.Dest()
	if filepath.IsAbs(d) || strings.HasPrefix(filepath.Clean(d), "..") {
		v.add(join(path, "destination"), "destination %q must be relative to the task directory and stay inside it (local/, alloc/ ...)", d)
	}
	if a.Mode != "" && !validEnum(a.Mode, ArtifactModes) {
		v.add(join(path, "mode"), "unknown mode %q (allowed: %s)", a.Mode, joinEnum(ArtifactModes))
	}
	for _, k := range slices.Sorted(maps.Keys(a.Options)) {
		switch k {
		case "checksum":
			typ, digest := a.Checksum()
			n, ok := ArtifactChecksums[typ]
			if _, err := hex.DecodeString(digest); !ok || err != nil || len(digest) != n {
				v.add(join(path, "options.checksum"), "checksum %q: want type:hex with a type among md5, sha1, sha256, sha512 and its full digest", a.Options[k])
			}
		case "archive":
			if o := a.Options[k]; o != "false" && !slices.Contains(ArchiveFormats, o) {
				v.add(join(path, "options.archive"), "archive %q: want \"false\" or a format among %s", o, strings.Join(ArchiveFormats, ", "))
			}
			if a.Options[k] != "false" && a.Mode == ArtifactFile {
				v.add(join(path, "options.archive"), "mode \"file\" saves the source as it is; an archive option would unpack it")
			}
		default:
			v.add(join(path, "options."+k), "option %q is not one hivelet's fetcher has (checksum, archive)", k)
		}
	}
}

func (v *validator) artifacts(path string, as []Artifact) {
	for i, a := range as {
		v.artifact(fmt.Sprintf("%s.artifacts[%d]", path, i), a)
	}
}
