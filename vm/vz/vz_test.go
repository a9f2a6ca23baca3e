//go:build darwin && cgo

package vz

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/Code-Hex/vz/v3"

	"github.com/airlock-dev/airlock/vm"
)

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&vz.NSError{Domain: "NSPOSIXErrorDomain", Code: int(syscall.ECONNRESET)}, true},
		{fmt.Errorf("wrapped: %w", &vz.NSError{Domain: "NSPOSIXErrorDomain", Code: int(syscall.ECONNREFUSED)}), true},
		{errConnectTimeout, true},
		{&vz.NSError{Domain: "VZErrorDomain", Code: int(vz.ErrorInternal)}, false},
		{context.Canceled, false},
		{errors.New("other"), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestValidateRejectsCompressedKernel(t *testing.T) {
	dir := t.TempDir()
	spec := vm.Spec{Name: "t", Kernel: "/nonexistent/Image", StateDir: dir, Link: vm.Link{Port: 1024}}
	if err := New(Config{}).Validate(context.Background(), spec); err == nil {
		t.Fatal("a missing kernel was accepted")
	}
}
