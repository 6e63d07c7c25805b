// Package secretstore reads the values that compose secrets, configs,
// environment values and chart values name by reference
// (x-flotilla.secretRef) from the secret stores the applications file
// declares (Vault or OpenBao KV v1 and v2, AWS Secrets Manager, 1Password
// Connect), and notices when a store rotates one.
//
// Its place in the reconcile pass is the render step: the reconciler gives
// the compose renderer a Resolution for the application, and every secret
// declared by reference is resolved through it. The Resolution checks the
// application's grant (the stores and path globs the applications file
// gives it, application.StoreGrant) before it asks any store, so a
// repository can name only what its operator granted. A value is read at
// most once per store pollInterval (where the store keeps versions, Vault
// KV v2 and 1Password items, the version is asked first and the value only
// when it moved; AWS Secrets Manager likewise, by the AWSCURRENT version
// id); between reads the last answer serves. The cache is shared by every
// application, which is why the grant is checked before it. A changed value
// gives the render a new content-named swarm secret, and the rest (one
// write per consuming service, retention of rotated secrets, the sweep,
// the revision record) is the pass's ordinary work; what the Resolution
// used is reported to the reconciler so the record can say "secret
// rotated" with store, path and version.
//
// Values are held in memory only, in Value.Data and the cache. Nothing this
// package returns other than Value.Data carries one: errors name the store,
// path and key, and quote only the store's own error messages.
package secretstore
