package sandbox

// Services are the Compose services a sandbox's runs start in the VM,
// under Docker inside it, before the command (and again in each reply
// round's new VM): the Compose file Airlock wrote for them (never the
// project's own) and the images to load first.
type Services struct {
	// File is the Compose file (images.ComposeFile), as written into the
	// VM.
	File []byte `json:"file"`
	// Names are the services it starts, in order.
	Names []string `json:"names"`
	// Images is an archive of their images (docker save) in the VM's
	// image, loaded before they start; empty: none.
	Images string `json:"images,omitempty"`
}
