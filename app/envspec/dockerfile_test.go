package envspec

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDockerfileFroms(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		args     map[string]string
		want     []From
		problems []string
	}{
		{name: "one image", file: "FROM debian:bookworm\nRUN true\n", want: []From{{Ref: "debian:bookworm", Line: 1}}},
		{
			name: "ARGs before FROM, defaults and build.args",
			file: "# syntax=docker/dockerfile:1\nARG VARIANT=3.12\nARG REG\nARG OS=${OS_DEFAULT:-bookworm}\n" +
				"FROM --platform=linux/amd64 ${REG}/python:${VARIANT}-${OS} AS base\n",
			args: map[string]string{"REG": "mcr.microsoft.com/devcontainers"},
			want: []From{{Ref: "mcr.microsoft.com/devcontainers/python:3.12-bookworm", Line: 5}},
		},
		{
			name: "stages and scratch are not images",
			file: "FROM golang:1.24 AS build\nRUN go build\nFROM scratch AS empty\nFROM build AS dev\nFROM dev\nCOPY --from=build /x /x\n",
			want: []From{{Ref: "golang:1.24", Line: 1}},
		},
		{
			name: "continued lines, comments, and the escape directive",
			file: "# escape=`\n\nFROM `\n  # a comment\n  ubuntu:24.04 `\n  AS base\n",
			want: []From{{Ref: "ubuntu:24.04", Line: 3}},
		},
		{
			name:     "an ARG without a value",
			file:     "ARG BASE\nFROM ${BASE}\n",
			problems: []string{"line 2: FROM ${BASE} is not an image reference"},
		},
		{
			name:     "quoting and shell in a reference",
			file:     "FROM \"debian\"\nFROM debian`id`\n",
			problems: []string{"line 1:", "line 2:"},
		},
		{
			name: "the platform arguments",
			file: "FROM --platform=$BUILDPLATFORM golang:1.24 AS build\nFROM build-${TARGETARCH:-x}\n",
			want: []From{{Ref: "golang:1.24", Line: 1}, {Ref: "build-" + runtime.GOARCH, Line: 2}},
		},
		{
			name: "moby's: patterns, and quoted words",
			file: "ARG S=${TARGETPLATFORM#linux/amd64}\nARG S=${S#linux/arm64}\nARG S=${S:+\"unsupported\"}\nARG S=${S:-\"supported\"}\n" +
				"ARG V=1.2.3\nFROM debian AS delve-supported\nFROM delve-${S} AS delve\nFROM golang:${V%.*}\n",
			want: []From{{Ref: "debian", Line: 6}, {Ref: "golang:1.2", Line: 8}},
		},
		{name: "no image", file: "FROM --platform=linux/arm64\n", problems: []string{"line 1: FROM names no image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := dockerfileFroms([]byte(tt.file), tt.args)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("froms (-want +got):\n%s", diff)
			}
			if len(problems) != len(tt.problems) {
				t.Fatalf("problems %q, want %d like %q", problems, len(tt.problems), tt.problems)
			}
			for i, p := range tt.problems {
				if !strings.HasPrefix(problems[i], p) {
					t.Errorf("problem %q, want it to start %q", problems[i], p)
				}
			}
		})
	}
	// A Dockerfile of a thousand FROMs names at most maxFroms.
	got, problems := dockerfileFroms([]byte(strings.Repeat("FROM debian\n", 1000)), nil)
	if len(got) != maxFroms || len(problems) != 1 {
		t.Errorf("%d images and %d problems from 1000 FROMs", len(got), len(problems))
	}
}
