package envspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
)

// projectFiles reads the files a description names, inside the project
// only: an os.Root's FS in Find (a link that leaves the project fails to
// open), an fstest.MapFS in tests.
type projectFiles struct {
	fsys fs.FS
	// dir is the project's absolute path, for Compose's loader, which
	// resolves relative paths against it (nothing is read through it).
	dir string
	// base is the project folder's name, for ${localWorkspaceFolderBasename}.
	base string
}

// inProject resolves p, relative to dir (a clean project-relative
// directory), to a clean project-relative path; ok is false when p is
// absolute or leaves the project.
func inProject(dir, p string) (string, bool) {
	if path.IsAbs(p) || strings.HasPrefix(p, `\`) {
		return "", false
	}
	q := path.Join(dir, p)
	if q == ".." || strings.HasPrefix(q, "../") {
		return "", false
	}
	return q, true
}

// read reads a project-relative file through the project's FS: a regular
// file of at most maxFileSize bytes and no NUL byte. A missing file is
// an error that wraps fs.ErrNotExist.
func (p projectFiles) read(name string) ([]byte, error) {
	if p.fsys == nil {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	f, err := p.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", name, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxFileSize)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, fmt.Errorf("%s has a NUL byte", name)
	}
	return data, nil
}

// stat is fs.Stat through the project's FS.
func (p projectFiles) stat(name string) (fs.FileInfo, error) {
	if p.fsys == nil {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return fs.Stat(p.fsys, name)
}

// build checks a Dockerfile build: dockerfile and context are relative to
// dir (the describing file's folder, project-relative); both must stay
// inside the project, the Dockerfile be a regular file and the context a
// directory. The Dockerfile's path defaults to Dockerfile in the context.
func (c *checker) build(key string, files projectFiles, dir, dockerfile, context string, args map[string]string, target string) *Build {
	return c.buildFrom(key, files, dir, dockerfile, "", context, args, target)
}

// buildFrom is build with the Dockerfile's text given (inline, a Compose
// service's dockerfile_inline) instead of its path, when not empty.
func (c *checker) buildFrom(key string, files projectFiles, dir, dockerfile, inline, context string, args map[string]string, target string) *Build {
	if context == "" {
		context = "."
	}
	b := &Build{Args: maps.Clone(args), Target: target}
	ctx, ok := inProject(dir, context)
	switch {
	case !c.text(key+"context", context):
	case !ok:
		c.failf(key+"context", "%q leaves the project; Airlock builds only from inside the project, so the build context must be the project or a folder in it", context)
	default:
		b.Context = ctx
		if fi, err := files.stat(ctx); err != nil || !fi.IsDir() {
			c.failf(key+"context", "%q is not a folder of the project (%s)", context, statWhy(err, "not a folder"))
		}
	}
	if dockerfile == "" {
		dockerfile = path.Join(context, "Dockerfile")
	}
	df, ok := inProject(dir, dockerfile)
	switch {
	case inline != "":
		b.Inline, b.InlineIn = inline, key+"dockerfile_inline"
		if len(inline) > maxInlineDockerfile {
			c.failf(key+"dockerfile_inline", "%d bytes: at most %d", len(inline), maxInlineDockerfile)
			break
		}
		c.dockerfileText(key+"dockerfile_inline", b.InlineIn, []byte(inline), b, args)
	case !c.text(key+"dockerfile", dockerfile):
	case !ok:
		c.failf(key+"dockerfile", "%q leaves the project; Airlock builds only Dockerfiles inside the project", dockerfile)
	default:
		b.Dockerfile = df
		if fi, err := files.stat(df); err != nil || !fi.Mode().IsRegular() {
			c.failf(key+"dockerfile", "%q is not a file of the project (%s)", dockerfile, statWhy(err, "not a regular file"))
		} else if data, err := files.read(df); err != nil {
			c.failf(key+"dockerfile", "%v", err)
		} else {
			c.dockerfileText(key+"dockerfile", df, data, b, args)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(args)) {
		c.text(key+"args."+name, name)
		c.text(key+"args."+name, args[name])
	}
	if target != "" {
		c.text(key+"target", target)
	}
	return b
}

// maxInlineDockerfile is the largest dockerfile_inline read (the Compose
// file holding it may be 1 MiB).
const maxInlineDockerfile = 256 << 10

// dockerfileText reads what the build is from its Dockerfile's text, for
// its key and the user's confirmation (a changed Dockerfile is asked
// again): its SHA-256 and its FROM images.
func (c *checker) dockerfileText(key, name string, data []byte, b *Build, args map[string]string) {
	var problems []string
	b.Sum = sum(data)
	b.From, problems = dockerfileFroms(data, args)
	for _, p := range problems {
		c.failf(key, "%s: %s", name, p)
	}
}

// statWhy says why a stat did not find what was wanted.
func statWhy(err error, otherwise string) string {
	switch {
	case err == nil:
		return otherwise
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist, or it is a link that leaves the project"
	default:
		return err.Error()
	}
}
