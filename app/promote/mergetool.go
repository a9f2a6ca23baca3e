package promote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/review"
)

// ErrNoMergeTool means the user has no merge tool set.
var ErrNoMergeTool = errors.New(`no merge tool is set: add one to [review] in config.toml, e.g. merge_tool = "code --wait --merge $MINE $THEIRS $BASE $OUTPUT"`)

// maxMergeOutput caps what is read back from a merge tool's $OUTPUT.
const maxMergeOutput = 256 << 20

// MergeTool runs the user's merge tool (sandbox.Store.MergeTool) on
// conflict c of sandbox sb and returns the result it saved, to be shown
// before it is written (a review.UseContent resolution).
func MergeTool(ctx context.Context, sb *sandbox.Sandbox, c *review.ConflictError) ([]byte, error) {
	tool := sb.Store().MergeTool
	if tool == nil {
		return nil, ErrNoMergeTool
	}
	argv, err := tool()
	if err != nil {
		return nil, fmt.Errorf("merge tool: %w", err)
	}
	if len(argv) == 0 {
		return nil, ErrNoMergeTool
	}
	return RunMergeTool(ctx, argv, c)
}

// RunMergeTool runs argv, whose words may hold $MINE, $THEIRS, $BASE and
// $OUTPUT, on temporary files on the host holding c's three versions;
// $OUTPUT holds the merge with conflict markers first (or the project's
// version when the file cannot be merged line by line). It returns what
// the tool left in $OUTPUT. The files are named by Airlock, never after
// the guest's path (only a plain extension is kept, for the tool's syntax
// colouring), and are removed afterwards. The tool runs without a shell.
func RunMergeTool(ctx context.Context, argv []string, c *review.ConflictError) ([]byte, error) {
	if !c.Editable() {
		return nil, fmt.Errorf("%s is not a regular file on both sides: a merge tool cannot resolve it; choose mine or theirs", c.Path)
	}
	dir, err := os.MkdirTemp("", "airlock-merge-")
	if err != nil {
		return nil, fmt.Errorf("merge tool: %w", err)
	}
	defer os.RemoveAll(dir)
	ext := safeExt(c.Path)
	output := c.Ours
	if c.Merge != nil {
		output = c.Merge.WithMarkers(review.MarkerLabels{Ours: "project now", Base: "snapshot", Theirs: "approved change"})
	}
	files := map[string][]byte{"$MINE": c.Ours, "$THEIRS": c.Theirs, "$BASE": c.Base, "$OUTPUT": output}
	names := map[string]string{}
	for ph, data := range files {
		name := filepath.Join(dir, strings.TrimPrefix(ph, "$")+ext)
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return nil, fmt.Errorf("merge tool: %w", err)
		}
		names[ph] = name
	}
	args := make([]string, len(argv))
	for i, w := range argv {
		// The longest placeholder first: none is a prefix of another.
		for _, ph := range []string{"$OUTPUT", "$THEIRS", "$MINE", "$BASE"} {
			w = strings.ReplaceAll(w, ph, names[ph])
		}
		args[i] = w
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	// One writer for both streams (one pipe: no two copies racing on
	// out), keeping the start and the end of what the tool says.
	var out bytes.Buffer
	said := headtail.New(&out, "merge tool output", 2048, 2048)
	cmd.Stdout, cmd.Stderr = said, said
	err = cmd.Run()
	said.Close()
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("the merge tool %s ended with %w%s; nothing was taken from it", argv[0], err, msg)
	}
	f, err := os.Open(names["$OUTPUT"])
	if err != nil {
		return nil, fmt.Errorf("merge tool: read its result: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMergeOutput+1))
	if err != nil {
		return nil, fmt.Errorf("merge tool: read its result: %w", err)
	}
	if len(data) > maxMergeOutput {
		return nil, fmt.Errorf("the merge tool's result is over %d MiB; nothing was taken from it", maxMergeOutput>>20)
	}
	if c.Merge != nil && bytes.Equal(data, output) {
		return nil, errors.New("the merge tool left the result as it was, conflict markers and all (was it closed without saving?); nothing was taken from it")
	}
	return data, nil
}

// safeExt is p's extension when it is short and plain (".go", ".py"),
// else "".
func safeExt(p string) string {
	ext := path.Ext(p)
	if len(ext) < 2 || len(ext) > 10 {
		return ""
	}
	for _, r := range ext[1:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return ""
		}
	}
	return ext
}
