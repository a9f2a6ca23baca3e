package prebuild

import (
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// TestSharedImages builds the minimal image, the guest's network client
// and the Debian layers (in that order: the first VM tests want the
// minimal image within a minute), beside the full image, and checks each
// image's files against its image.toml.
func TestSharedImages(t *testing.T) {
	testenv.SkipIfShort(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.Run("full", func(t *testing.T) {
			verify(t, testenv.FullImage(t, vm.AMD64))
		})
	}()
	t.Run("minimal", func(t *testing.T) {
		verify(t, testenv.Image(t, vm.AMD64))
		testenv.NetClient(t, vm.AMD64)
	})
	t.Run("debian", func(t *testing.T) {
		testenv.DebianEnv(t)
		testenv.DebianTools(t)
	})
	wg.Wait()
}

func verify(t *testing.T, im *image.Image) {
	t.Helper()
	if err := im.Verify(); err != nil {
		t.Errorf("the %s image as built: %v", im.Meta.Name, err)
	}
}
