package envspec

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// maxFroms bounds the FROM instructions a Dockerfile may have: the images
// a build pulls, each named in the user's confirmation.
const maxFroms = 32

// From is one image a Dockerfile's build starts a stage from: not an
// earlier stage of its own, and not scratch.
type From struct {
	// Ref is the image reference with the build's ARG values expanded.
	Ref string `json:"ref"`
	// Line is the FROM instruction's line in the Dockerfile (from 1).
	Line int `json:"line"`
}

// dockerfileFroms reads what the host needs of a Dockerfile before
// anything is built: the images its stages start from (Docker in a
// builder VM does the build, and parses the file again, for real). It
// reads only FROM and the ARGs before the first FROM (the only ones a
// FROM may use), joins continued lines, skips comments, and honours the
// escape parser directive. A reference that still holds a variable
// after expansion, or that is not plain text, is an error: the user is
// asked to confirm the images by name.
//
// BuildKit's own parser is not used on the host: its module brings
// protobuf and containerd's type registry for a dozen lines' worth of
// syntax that matters here, and the file is parsed by Docker anyway.
func dockerfileFroms(data []byte, args map[string]string) ([]From, []string) {
	escape := byte('\\')
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	// Parser directives: comments of the form "# key=value" before
	// anything else.
	for _, l := range lines {
		m := directive.FindStringSubmatch(l)
		if m == nil {
			break
		}
		if strings.EqualFold(m[1], "escape") && (m[2] == "`" || m[2] == `\`) {
			escape = m[2][0]
		}
	}
	// BuildKit's automatic platform arguments, for the guest's
	// architecture (the host's: a guest runs natively).
	vars := map[string]string{}
	for _, p := range []string{"BUILD", "TARGET"} {
		vars[p+"PLATFORM"], vars[p+"OS"], vars[p+"ARCH"], vars[p+"VARIANT"] = "linux/"+runtime.GOARCH, "linux", runtime.GOARCH, ""
	}
	stages := map[string]bool{}
	var froms []From
	var problems []string
	seenFrom := false
	for i := 0; i < len(lines); i++ {
		start := i + 1
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		// A continued instruction: the escape character at the end of
		// a line joins the next (comment lines inside are dropped).
		for strings.HasSuffix(l, string(escape)) && i+1 < len(lines) {
			l = strings.TrimSuffix(l, string(escape))
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				next = string(escape) // keep joining past a comment
			}
			l += " " + next
		}
		words := strings.Fields(l)
		if len(words) == 0 {
			continue
		}
		switch strings.ToUpper(words[0]) {
		case "ARG":
			if seenFrom {
				continue
			}
			for _, w := range words[1:] {
				name, def, hasDef := strings.Cut(w, "=")
				v, given := args[name]
				switch {
				case given:
					vars[name] = v
				case hasDef:
					vars[name] = expandArgs(strings.Trim(def, `"'`), vars)
				}
			}
		case "FROM":
			seenFrom = true
			rest := words[1:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
				rest = rest[1:] // --platform=…
			}
			if len(rest) == 0 {
				problems = append(problems, lineNo(start)+"FROM names no image")
				continue
			}
			ref := expandArgs(rest[0], vars)
			if len(rest) >= 3 && strings.EqualFold(rest[1], "AS") {
				stages[strings.ToLower(rest[2])] = true
			}
			switch {
			case stages[strings.ToLower(ref)] && !(len(rest) >= 3 && strings.EqualFold(rest[2], ref)):
				// An earlier stage of this Dockerfile.
			case strings.EqualFold(ref, "scratch"):
			case strings.ContainsAny(ref, "$`\"'\\") || !imageRef.MatchString(ref):
				problems = append(problems, lineNo(start)+"FROM "+ref+" is not an image reference Airlock can name (a variable without a value, or quoting): give the ARG a value in build.args")
			case len(froms) >= maxFroms:
				if len(froms) == maxFroms {
					problems = append(problems, lineNo(start)+"more than "+strconv.Itoa(maxFroms)+" images")
					froms = append(froms, From{}) // said once
				}
			default:
				froms = append(froms, From{Ref: ref, Line: start})
			}
		}
	}
	if len(froms) > maxFroms {
		froms = froms[:maxFroms]
	}
	return froms, problems
}

func lineNo(n int) string { return "line " + strconv.Itoa(n) + ": " }

var (
	directive = regexp.MustCompile(`^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$`)
	argRef    = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])([^}]*)|([#%])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
	// imageRef is the shape of an image reference: registry, path, tag
	// and digest characters only (go-containerregistry checks it
	// properly where it is pulled).
	imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
)

// expandArgs expands ${NAME}, $NAME, ${NAME:-word}, ${NAME-word},
// ${NAME:+word}, ${NAME+word}, ${NAME#pattern} and ${NAME%pattern} from
// vars, as BuildKit's shell lexer does (a word's quotes removed); an
// unknown name is left as written, so the reference is refused.
func expandArgs(s string, vars map[string]string) string {
	return argRef.ReplaceAllStringFunc(s, func(m string) string {
		sm := argRef.FindStringSubmatch(m)
		if sm[6] != "" {
			if v, ok := vars[sm[6]]; ok {
				return v
			}
			return m
		}
		name, op, word := sm[1], sm[2]+sm[4], unquote(sm[3]+sm[5])
		v, ok := vars[name]
		switch op {
		case "":
			if ok {
				return v
			}
		case ":-":
			if ok && v != "" {
				return v
			}
			return word
		case "-":
			if ok {
				return v
			}
			return word
		case ":+":
			if ok && v != "" {
				return word
			}
			return ""
		case "+":
			if ok {
				return word
			}
			return ""
		case "#":
			if ok {
				return trimPattern(v, word, true)
			}
		case "%":
			if ok {
				return trimPattern(v, word, false)
			}
		}
		return m
	})
}

// trimPattern removes the shortest prefix (or suffix) of v that matches
// the glob pattern.
func trimPattern(v, pattern string, prefix bool) string {
	for i := 0; i <= len(v); i++ {
		if prefix {
			if ok, _ := path.Match(pattern, v[:i]); ok {
				return v[i:]
			}
		} else if ok, _ := path.Match(pattern, v[len(v)-i:]); ok {
			return v[:len(v)-i]
		}
	}
	return v
}

func unquote(w string) string {
	if len(w) >= 2 && (w[0] == '"' || w[0] == '\'') && w[len(w)-1] == w[0] {
		return w[1 : len(w)-1]
	}
	return w
}

// sum is the hex SHA-256 of data.
func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}
