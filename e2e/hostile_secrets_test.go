package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// Rule 5: SOPS values decrypted for one application never reach another's
// stack, and never reach the manifest. Team B's application is in a
// project with its own age key; the controller-wide key is team A's, as
// for a team not yet moved to a project key. Every attack is refused
// before any write.
func TestHostileSecrets(t *testing.T) {
	t.Parallel()
	teamA, teamB := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	ctlKey, err := sopsage.ParseIdentities(teamA.File)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "team-b-age-key")
	if err := os.WriteFile(keyFile, teamB.File, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, true)
	h.app.Project = &application.ProjectTerms{Name: "team-b", SOPS: &application.SOPS{AgeKeyFile: keyFile}}
	good := sopsFiles(t, teamB.Recipient, e2ePassword)
	h.repo.Commit("team B's own secrets", good)
	ctl := h.sopsController(ctlKey)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatalf("team B's own ciphertext: %v", res.Err)
	}
	h.waitRunning(1)

	const teamAPassword, teamAToken = "team-a-db-pw-0b7d", "team-a-token-44e1"
	labelled := strings.Replace(sopsStackFile, "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    labels:\n      leak: "+teamAToken+"\n", 1)
	commanded := strings.Replace(sopsStackFile, "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    command: [\"sh\", \"-c\", \"echo "+teamAToken+"\"]\n", 1)
	attacks := []attack{
		{
			name:  "team A's secret file copied into team B's repository",
			files: map[string]string{"deploy/db_password.txt": string(sopsagetest.Encrypt(t, "db_password.txt", []byte(teamAPassword), teamA.Recipient))},
			want:  []string{"db_password.txt", "no age identity matches"},
		},
		{
			name:  "team A's env file copied in as the service's env_file",
			files: map[string]string{"deploy/app.env": string(sopsagetest.Encrypt(t, "app.env", []byte("API_TOKEN="+teamAToken+"\n"), teamA.Recipient))},
			want:  []string{"app.env", "no age identity matches"},
		},
		{
			name:  "team A's interpolation file copied in as .env",
			files: map[string]string{"deploy/.env": string(sopsagetest.Encrypt(t, ".env", []byte("DB_USER="+teamAToken+"\n"), teamA.Recipient))},
			want:  []string{".env", "no age identity matches"},
		},
		{
			name:  "a decrypted value smuggled into a label",
			files: map[string]string{"deploy/docker-compose.yml": string(sopsagetest.EncryptMatching(t, "docker-compose.yml", []byte(labelled), "^leak$", teamB.Recipient))},
			want:  []string{"docker-compose.yml", "services.app.labels", "only environment values are sealed"},
		},
		{
			name:  "a decrypted value smuggled into a command",
			files: map[string]string{"deploy/docker-compose.yml": string(sopsagetest.EncryptMatching(t, "docker-compose.yml", []byte(commanded), "^command$", teamB.Recipient))},
			want:  []string{"docker-compose.yml", "command", "only environment values are sealed"},
		},
		{
			name:  "the whole compose file encrypted",
			files: map[string]string{"deploy/docker-compose.yml": string(sopsagetest.Encrypt(t, "docker-compose.yml", []byte(sopsStackFile), teamB.Recipient))},
			want:  []string{"docker-compose.yml", "only environment values are sealed"},
		},
	}
	h.refuseEach(ctl, good, attacks)

	// Nothing of team A's plaintext reached team B's services or records.
	env := strings.Join(h.services()["app"].Spec.TaskTemplate.ContainerSpec.Env, "\n")
	rels, err := h.backend.Releases(context.Background(), h.app.Stack)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rels {
		env += "\n" + r.Manifest
	}
	for _, v := range []string{teamAPassword, teamAToken} {
		if strings.Contains(env, v) {
			t.Errorf("team B's service or release records hold team A's plaintext %q", v)
		}
	}
}
