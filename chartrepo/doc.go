// Package chartrepo fetches charts from chart repositories: an index.yaml
// served over HTTP(S) that lists each chart's versions, with an archive
// URL and a sha256 digest per version.
//
// A repository is untrusted input reached over the network, so every step
// is bounded and checked: the index and the archive have size limits and a
// deadline per request, an archive is verified against the index's digest
// before a byte of it is read, and it is unpacked only if every entry is a
// plain file or directory inside the chart. Unpacked charts are kept in a
// cache keyed by digest, so a version fetched once is never downloaded
// again, and a rollback or restart does not need the repository. A
// repository that fails backs off on its own; other repositories, and the
// applications using them, are not held up by it.
package chartrepo
