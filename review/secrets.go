package review

import (
	"math"
	"path"
	"regexp"
	"strings"
)

// Strings added that look like credentials: a private key block, a
// well-known token shape (AWS, GitHub, GitLab, Slack, Stripe, Google,
// OpenAI, Anthropic, npm, a JWT), or a long high-entropy word on a line
// that names a secret. The flag names what was found and where, never
// the string itself (the reason reaches the audit log and the terminal).

// tokenShape is a well-known credential format.
type tokenShape struct {
	label  string
	prefix string // every match holds it: a cheap test before the regexp
	re     *regexp.Regexp
}

var tokenShapes = []tokenShape{
	{"AWS access key ID", "A", regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`)},
	{"GitHub token", "gh", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,255}\b`)},
	{"GitHub token", "github_pat_", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,255}\b`)},
	{"GitLab token", "glpat-", regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}\b`)},
	{"Slack token", "xox", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	{"Slack webhook", "hooks.slack.com", regexp.MustCompile(`hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+`)},
	{"Stripe secret key", "_live_", regexp.MustCompile(`\b[sr]k_live_[A-Za-z0-9]{16,}\b`)},
	{"Google API key", "AIza", regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`)},
	{"Anthropic API key", "sk-ant-", regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{32,}`)},
	{"OpenAI API key", "sk-", regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}|\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}`)},
	{"npm token", "npm_", regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`)},
	{"PyPI token", "pypi-", regexp.MustCompile(`\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}`)},
	{"HTTP authorization header", "uthorization", regexp.MustCompile(`(?i)\bauthorization["']?\s*[:=]\s*["']?(?:basic|bearer|token)\s+[A-Za-z0-9+/=._~-]{16,}`)},
	{"JSON web token", "eyJ", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`)},
}

// privateKeyBlock matches the first line of a PEM private key ("-----BEGIN
// RSA PRIVATE KEY-----", OpenSSH's, PGP's "PRIVATE KEY BLOCK").
var privateKeyBlock = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]* PRIVATE KEY(?: BLOCK)?-----`)

// secretWord is a name that says its value is a secret.
const secretWord = `(?:secret|passw|pwd|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth[_-]?(?:key|token)|signing[_-]?key|session[_-]?key)`

// secretAssigned matches what comes before a value assigned to a name
// holding secretWord, up to the value's opening quote: "api_key = '",
// "\"client_secret\": \"", "PASSWORD=", "token: ". Only such a value is
// tested for entropy: tuned on the Go tree (secrets_test.go), a
// high-entropy word anywhere is most often a checksum, a test vector or
// encoded test data (some 21,700 lines), one named as a secret rarely.
var secretAssigned = regexp.MustCompile(`(?i)[A-Za-z0-9_.-]*` + secretWord + `[A-Za-z0-9_.-]*["'\]]?\s*(?::=|=>|=|:)\s*["'` + "`" + `]?$`)

// High-entropy words: at least minEntropyLen characters of one of two
// alphabets, with a Shannon entropy (bits per character) of at least
// the threshold for their length (entropyThreshold).
const (
	minEntropyLen = 24
	maxEntropyLen = 512
)

// credentialFlag flags f when its added lines hold what looks like a
// credential. Lockfiles (checksums) and binary content are not scanned.
func credentialFlag(f *File) (Flag, bool) {
	if f.Binary || len(f.Hunks) == 0 || lockfileNames[path.Base(f.Path)] {
		return Flag{}, false
	}
	found := map[string][]int{}
	addedLines(f, func(l string, n int) {
		for _, what := range credentialsIn(l) {
			found[what] = append(found[what], n)
		}
	})
	if len(found) == 0 {
		return Flag{}, false
	}
	reason, lines := markerReason(found)
	return Flag{Kind: FlagCredential, Reason: "possible credential: " + reason, Lines: lines}, true
}

// credentialsIn returns what line holds that looks like a credential,
// each kind once.
func credentialsIn(line string) []string {
	var out []string
	if strings.Contains(line, "PRIVATE KEY") && privateKeyBlock.MatchString(line) {
		out = append(out, "private key block")
	}
	seen := map[string]bool{}
	for _, s := range tokenShapes {
		if seen[s.label] || !strings.Contains(line, s.prefix) {
			continue
		}
		for _, m := range s.re.FindAllString(line, 4) {
			if !strings.HasSuffix(m, "EXAMPLE") {
				seen[s.label] = true
				out = append(out, s.label)
				break
			}
		}
	}
	if len(out) == 0 && hasHighEntropyWord(line) {
		out = append(out, "high-entropy string")
	}
	return out
}

// hasHighEntropyWord reports whether line assigns a name that says
// secret (secretAssigned) a word that looks random: hex of at least 32
// characters, or base64-like (letters of both cases and digits) of at
// least minEntropyLen, whose entropy reaches entropyThreshold.
func hasHighEntropyWord(line string) bool {
	if len(line) < minEntropyLen {
		return false
	}
	for _, at := range candidateWords(line) {
		w := line[at[0]:at[1]]
		if len(w) > maxEntropyLen {
			w = w[:maxEntropyLen]
		}
		if looksRandom(w) && secretAssigned.MatchString(line[max(0, at[0]-maxNameLen):at[0]]) {
			return true
		}
	}
	return false
}

// maxNameLen is how much of the line before a value is read for the
// name it is assigned to.
const maxNameLen = 128

// candidateWords returns where line holds runs of base64 and URL-safe
// base64 characters at least minEntropyLen long (start and end).
func candidateWords(line string) [][2]int {
	var out [][2]int
	start := -1
	for i := 0; i <= len(line); i++ {
		if i < len(line) && isTokenByte(line[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start >= minEntropyLen {
			out = append(out, [2]int{start, i})
		}
		start = -1
	}
	return out
}

// isTokenByte reports whether c is a base64 or URL-safe base64
// character; the padding "=" is not, as it separates a name from its
// value more often than it ends one.
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

// looksRandom reports whether w, a candidate word, looks like random
// key material rather than a name, a path or an alphabet.
func looksRandom(w string) bool {
	var lower, upper, digit, hexOnly = 0, 0, 0, true
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z':
			lower++
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= '0' && c <= '9':
			digit++
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			hexOnly = false
		}
	}
	if hasRun(w) {
		return false
	}
	if hexOnly {
		return len(w) >= 32 && digit > 0 && (lower > 0 || upper > 0) && (lower == 0 || upper == 0) &&
			entropy(w) >= entropyThreshold(len(w), 16)
	}
	if lower == 0 || upper == 0 || digit == 0 || len(w) < minEntropyLen {
		return false
	}
	// A name in camel case (DecryptPKCS1v15SessionKey) keeps to one kind
	// of character for several in a row; a random word changes kind (upper,
	// lower, digit, other) at about 2 characters in 3.
	if float64(classChanges(w)) < 0.45*float64(len(w)-1) {
		return false
	}
	// Words split by '/', '_' or '-' into short parts are paths and
	// names (some/path/to/file_v2, SOME_CONSTANT_NAME_2).
	if parts := strings.FieldsFunc(w, func(r rune) bool { return r == '/' || r == '_' || r == '-' }); len(parts) > 1 {
		longest := 0
		for _, p := range parts {
			longest = max(longest, len(p))
		}
		if longest < minEntropyLen*2/3 {
			return false
		}
	}
	return entropy(w) >= entropyThreshold(len(w), 64)
}

// classChanges counts the neighbours in w that differ in kind (upper
// case, lower case, digit, other).
func classChanges(w string) int {
	class := func(c byte) int {
		switch {
		case c >= 'a' && c <= 'z':
			return 0
		case c >= 'A' && c <= 'Z':
			return 1
		case c >= '0' && c <= '9':
			return 2
		}
		return 3
	}
	n := 0
	for i := 1; i < len(w); i++ {
		if class(w[i]) != class(w[i-1]) {
			n++
		}
	}
	return n
}

// hasRun reports whether w holds 6 characters in alphabetical order
// ("abcdef", "012345"): an alphabet or a test pattern, not a key.
func hasRun(w string) bool {
	run := 1
	for i := 1; i < len(w); i++ {
		if w[i] == w[i-1]+1 {
			if run++; run >= 6 {
				return true
			}
		} else {
			run = 1
		}
	}
	return false
}

// entropy is the Shannon entropy of w in bits per character.
func entropy(w string) float64 {
	var counts [256]int
	for i := 0; i < len(w); i++ {
		counts[w[i]]++
	}
	h := 0.0
	n := float64(len(w))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// entropyThreshold is the entropy a word of n characters must reach to
// look random: 85% of what a random word of n characters over an
// alphabet of k symbols has on average. A random word is short of the
// alphabet's log2(k) bits because its characters repeat; the expected
// number of distinct characters is k(1-(1-1/k)^n), and a word that
// uses d distinct characters about evenly has log2(d) bits.
func entropyThreshold(n, k int) float64 {
	d := float64(k) * (1 - math.Pow(1-1/float64(k), float64(n)))
	return 0.85 * math.Log2(d)
}
