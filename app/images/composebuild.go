package images

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// composeBuildDir is where the environment's build unpacks the Compose
// services' build inputs in the builder; it is removed before the layer
// is kept.
const composeBuildDir = "/var/lib/airlock-compose-build"

// ServiceTag is the name of the image Airlock builds for a Compose
// service with a build of its own: in the registry airlock.invalid, a
// name that is never a registry's (RFC 2606), so it never stands for a
// real image, whatever the project calls the service or its image. It
// is saved with the pulled images and a run's Compose file runs it.
func ServiceTag(service string) string {
	tag := "service-" + service
	if !tagText.MatchString(service) {
		sum := sha256.Sum256([]byte(service))
		tag = "service-" + hex.EncodeToString(sum[:8])
	}
	return "airlock.invalid/compose:" + tag
}

// tagText is a service name a tag can hold as it is.
var tagText = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// serviceBuild is a Compose service built from a Dockerfile of its own,
// read for the environment's build as the Dockerfile form reads its
// build.
type serviceBuild struct {
	service string
	b       *envspec.Build
	*buildInput
}

// readServiceBuilds reads the context and Dockerfile of each of spec's
// Compose services that has a build (readBuildInput: no .git, secrets
// left out, the builder's limits, which all of them together must keep
// to as well).
func (src *Source) readServiceBuilds(ctx context.Context, project string, spec *envspec.Environment) ([]serviceBuild, error) {
	if spec.Compose == nil {
		return nil, nil
	}
	var out []serviceBuild
	for _, s := range spec.Compose.Services {
		if s.Build == nil {
			continue
		}
		in, err := src.readBuildInput(ctx, project, spec.Source, s.Build)
		if err != nil {
			return nil, fmt.Errorf("environment %s: the Compose service %s: %w", spec.Source, safetext.Line(s.Name), err)
		}
		out = append(out, serviceBuild{service: s.Name, b: s.Build, buildInput: in})
	}
	// They are sent into the builder together: the limits are theirs too.
	var all manifest.Manifest
	for _, sb := range out {
		all.Entries = append(all.Entries, sb.m.Entries...)
	}
	if err := contextFits(&all); err != nil {
		return nil, fmt.Errorf("environment %s: the Compose services' build contexts, sent as one, %w", spec.Source, err)
	}
	return out, nil
}

// serviceBuildsKey is an environment's key with what its services'
// builds read: each build as described (its Dockerfile's SHA-256 is
// there) and every file of its context, as a Dockerfile build's key
// holds them. Without builds it is key.
func serviceBuildsKey(key string, builds []serviceBuild) string {
	if len(builds) == 0 {
		return key
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00compose builds 1\x00", key)
	for _, sb := range builds {
		desc, _ := json.Marshal(sb.b) // plain data
		fmt.Fprintf(h, "%q\x00%s\x00", sb.service, desc)
		writeEntries(h, sb.m)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeServiceBuilds writes the builds' inputs as one tar: build i's
// context under i/context/ and its Dockerfile as i/Dockerfile.
func writeServiceBuilds(ctx context.Context, w io.Writer, builds []serviceBuild) error {
	tw := tar.NewWriter(w)
	for i, sb := range builds {
		dir := strconv.Itoa(i) + "/"
		for _, d := range []string{dir, dir + "context/"} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		if err := addContext(ctx, tw, dir+"context/", sb.dir, sb.m); err != nil {
			return err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: dir + "Dockerfile", Mode: 0o644, Size: int64(len(sb.dockerfile)), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(sb.dockerfile); err != nil {
			return err
		}
	}
	return tw.Close()
}

// serviceFroms are the images the services' Dockerfiles start from.
func serviceFroms(cs *envspec.Compose) []string {
	if cs == nil {
		return nil
	}
	var out []string
	for _, s := range cs.Services {
		if s.Build != nil {
			out = append(out, fromRefs(s.Build)...)
		}
	}
	return out
}
