// Package compose is the only place compose files are read and turned into
// swarm objects. It uses docker/cli's own loader and convert packages, so a
// file means to Flotilla exactly what it means to `docker stack deploy`;
// what differs is written down on Render.
//
// Rendering and converting are two steps with a text between them. Render
// reads a project from a repository checkout and produces a manifest: a
// self-contained, deterministic document that a release records and a
// deploy converts. Convert turns a manifest into a Stack, without reading
// any file and, given no Resolver, without needing any object to exist —
// which is how a stored revision is read long after its configs are gone.
//
// # Manifest format
//
// A manifest is one YAML document, written with sorted map keys and
// two-space indentation, so that the same project gives the same bytes on
// every host and a change that touches no service (a comment, key order,
// an x- extension) gives no change at all:
//
//	kind: flotilla.compose/v1
//	stack: demo                      # names below are scoped to it
//	compose:                         # the merged, interpolated compose model
//	  version: "3.8"
//	  services: {...}                # env_file already folded into environment
//	  configs:
//	    app_conf:
//	      name: demo_app_conf-c477fcdc10   # file: replaced by the swarm name
//	  secrets:
//	    db_password:
//	      name: demo_db_password-a2c9f0ee9a
//	configs:                         # data of each config the stack creates
//	  demo_app_conf-c477fcdc10:
//	    key: app_conf
//	    data: |                      # or base64: when not UTF-8, or
//	      listen = ":8080"           # sealed: for a decrypted file
//	secrets:                         # never the plaintext
//	  demo_db_password-a2c9f0ee9a:
//	    key: db_password
//	    sha256: a2c9f0ee9a4b...      # so a pinned name still changes the manifest
//	                                 # (hmacSHA256: for a decrypted file)
//
// A secret taken from a secret store (x-flotilla.secretRef, see
// secretref.go) carries from: (store:path#key) and storeTag: (a digest of
// the store's tag for the value) in place of a digest of its content. A
// config taken from a store carries from: and its data sealed (below); an
// environment value a service takes from a store (its x-flotilla.env) is
// sealed in its environment.
//
// A value decrypted with SOPS appears in the manifest only as a placeholder,
// "flotilla-sealed:" and a keyed digest, in an environment entry or as a
// config's sealed: field; Rendered.Sealed holds the plaintext and Unseal
// puts it back into converted specs (see decrypt_seal.go).
//
// The compose section is docker/cli's types.Config as YAML and is read back
// by the same loader, with interpolation off (a "$" in it is literal). It
// holds no path of the checkout: relative config and secret files have
// become content, env files have become environment entries, and relative
// bind mounts are refused. Secret plaintext exists only in
// Rendered.Secrets, in memory.
package compose
