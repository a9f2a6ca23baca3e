module github.com/airlock-dev/airlock

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/Code-Hex/vz/v3 v3.7.1
	github.com/aymanbagabas/go-udiff v0.4.1
	github.com/cavaliergopher/cpio v1.0.1
	github.com/creack/pty v1.1.24
	github.com/google/go-cmp v0.7.0
	github.com/hashicorp/yamux v0.1.2
	github.com/mdlayher/vsock v1.4.0
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/pkg/sftp v1.13.12
	github.com/spf13/cobra v1.10.2
	golang.org/x/crypto v0.58.0
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require (
	github.com/Code-Hex/go-infinity-channel v1.0.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/kr/fs v0.1.0 // indirect
	github.com/mdlayher/socket v0.8.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/mod v0.22.0 // indirect
	golang.org/x/net v0.62.0 // indirect
)
