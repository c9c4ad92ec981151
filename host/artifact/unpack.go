package artifact

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// unpack extracts the archive in f into dest and returns the top-level
// paths it wrote.
func unpack(f *os.File, format, dest string) ([]string, error) {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, err
	}
	top := map[string]bool{}
	var order []string
	note := func(name string) {
		first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(name)), "/")
		if !top[first] {
			top[first] = true
			order = append(order, filepath.Join(dest, first))
		}
	}
	var err error
	switch format {
	case "zip":
		err = unzip(f, dest, note)
	case "tar":
		err = untar(f, dest, note)
	case "tar.gz", "tgz":
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(f); err == nil {
			err = untar(zr, dest, note)
		}
	case "tar.bz2", "tbz2":
		err = untar(bzip2.NewReader(f), dest, note)
	default:
		err = fmt.Errorf("archive format %q is not one hivelet unpacks", format)
	}
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", format, err)
	}
	return order, nil
}

// target is where an entry lands, refused if it leaves dest.
func target(dest, name string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(name))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("entry %q would be written outside the destination", name)
	}
	return filepath.Join(dest, clean), nil
}

// linkStaysInside refuses a symbolic link whose target leaves dest.
func linkStaysInside(dest, at, link string) error {
	resolved := link
	if !filepath.IsAbs(link) {
		resolved = filepath.Join(filepath.Dir(at), link)
	}
	if r, err := filepath.Rel(dest, resolved); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return fmt.Errorf("link %s -> %q points outside the destination", at, link)
	}
	return nil
}

func untar(r io.Reader, dest string, note func(string)) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p, err := target(dest, h.Name)
		if err != nil {
			return err
		}
		if p == dest {
			continue
		}
		note(h.Name)
		mode := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(p, tr, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := linkStaysInside(dest, p, h.Linkname); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeLink:
			src, err := target(dest, h.Linkname)
			if err != nil {
				return err
			}
			_ = os.Remove(p)
			if err := os.Link(src, p); err != nil {
				return err
			}
		default:
			// Devices, fifos and the like are not a download's business.
			return fmt.Errorf("entry %q: type %q is neither a file, a directory nor a link", h.Name, h.Typeflag)
		}
	}
}

func unzip(f *os.File, dest string, note func(string)) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		return err
	}
	for _, zf := range zr.File {
		p, err := target(dest, zf.Name)
		if err != nil {
			return err
		}
		if p == dest {
			continue
		}
		note(zf.Name)
		if zf.FileInfo().IsDir() {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if zf.Mode()&os.ModeType != 0 {
			return fmt.Errorf("entry %q: only files and directories are unpacked from a zip", zf.Name)
		}
		rc, err := zf.Open()
		if err != nil {
			return err
		}
		err = writeFile(p, rc, zf.Mode().Perm())
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	_ = os.Remove(p) // a link left by an earlier entry is replaced, not followed
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
