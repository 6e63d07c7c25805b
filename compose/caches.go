package compose

// memo is every cache the package keeps, in one value: what a long-running
// controller holds for its renders and conversions is bounded here and
// nowhere else, at most about 100 MB counted in the text each entry came
// from, far less in practice. Each entry is checked against the content it
// was made from before it is used, so a stale one costs a miss, never a
// wrong answer.
var memo = newCaches()

// caches are the package's memos; see memo.
type caches struct {
	// renders: whole renders. A render is a function of its options and of
	// the files it reads, nothing else (never the host's environment or
	// the checkout's location), so a render whose options are the same and
	// whose every file reads the same as an earlier one's gives what that
	// one gave. Checking costs a read and a hash of each file; a render
	// costs a parse, a load and an encode of all of them. It serves a new
	// commit that left an application's files alone, and every caller that
	// renders without the reconciler's cache (the CLI, a rollback). A
	// render that decrypted anything is not kept: its result depends on
	// key material no option names, and its plaintext stays with the
	// caller.
	renders *renderMemo
	// pieces: the latest incremental render of each application. A state
	// holds about what its manifest does several times over (the loaded
	// model, the manifest's lines, the converted specs), so it is bounded
	// by manifest bytes.
	pieces *incMemo
	// chunks: the pieces of compose files parsed recently, by their text.
	// A parsed piece takes several times its text in memory, hence the
	// small bound: enough for the files of a few large stacks.
	chunks *chunkMemo
	// conversions: converted manifests, by text. The reconciler converts
	// the same manifest on every pass (for drift, for a deploy, for what a
	// stored revision declares); the same text converts the same way every
	// time, and only the ids, which are asked for anew on every call, can
	// differ. Bounded to 256 manifests: a 5-service conversion held about
	// 12 KB, so at 1,000 applications a bound of 4,096 kept 12 MB of the
	// controller's 45 MB live heap, which a steady pass never reads (it
	// skips conversion while the live services are unchanged) and which
	// the garbage collector had to mark on every cycle. A pass converts its
	// manifest and compares with it moments later, well inside 256.
	conversions *convertMemo
	// validated: digests of compose sections that passed schema
	// validation. Validation is most of the cost of a Convert, and the
	// same text cannot validate differently the second time.
	validated *digestSet
}

func newCaches() *caches {
	return &caches{
		renders:     &renderMemo{maxBytes: 64 << 20, maxEntries: 4096},
		pieces:      &incMemo{maxBytes: 16 << 20, maxEntries: 64},
		chunks:      &chunkMemo{maxBytes: 4 << 20},
		conversions: &convertMemo{maxBytes: 16 << 20, maxEntries: 256},
		validated:   &digestSet{max: 512},
	}
}
