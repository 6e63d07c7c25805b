//go:build race

package renderbox

// raceEnabled: the race detector's shadow memory fails an address-space
// limit in its own ways, which the memory test cannot name.
const raceEnabled = true
