package compose

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
)

// maxObjectName is Swarm's limit on config and secret names.
const maxObjectName = 64

// hashLen is how many hex digits of the content digest a name carries: enough
// that two revisions of one config never meet, short enough to read.
const hashLen = 10

// stackNameRE is what Render accepts as a stack name. Scoped names are
// "<stack>_<key>", so the stack must itself be a valid leading part of a
// service, network, config and secret name.
var stackNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]*$`)

// checkStack refuses a stack name that could not prefix swarm object names.
func checkStack(stack string) error {
	if !stackNameRE.MatchString(stack) {
		return fmt.Errorf("invalid stack name %q: use letters, digits, '-' and '_', starting with a letter or digit", stack)
	}
	return nil
}

// digest is the full hex sha256 of data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// hashedName is the swarm name of a config or secret the stack creates:
// "<stack>_<key>-<first 10 hex of sha256(content)>". Configs and secrets are
// immutable in Swarm, so putting the content in the name is what lets a
// changed file roll out as a new object (and the service reference follow)
// instead of failing to update one that is in use.
//
// When that would pass Swarm's 64-character limit the key is cut short and
// followed by 8 hex of its own digest, so two long keys sharing a prefix still
// get different names; the stack prefix (which ownership is read from) and the
// content hash are always kept whole.
func hashedName(stack, key string, content []byte) (string, error) {
	return nameWithSum(stack, key, digest(content)[:hashLen])
}

// nameWithSum is hashedName with the content digest given: a keyed one for
// decrypted content, whose plain hash must not be readable.
func nameWithSum(stack, key, sum string) (string, error) {
	name := stack + "_" + key + "-" + sum
	if len(name) <= maxObjectName {
		return name, nil
	}
	keySum := digest([]byte(key))[:8]
	// stack + "_" + prefix + "." + keySum + "-" + sum
	room := maxObjectName - len(stack) - 1 - 1 - len(keySum) - 1 - len(sum)
	if room < 1 {
		return "", fmt.Errorf("stack name %q is too long to name %q within Swarm's %d characters", stack, key, maxObjectName)
	}
	return stack + "_" + key[:room] + "." + keySum + "-" + sum, nil
}
