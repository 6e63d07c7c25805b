package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// Secret values the task prints. The image prints its environment, so the
// file secrets' values reach the logs through env values the compose file
// copies them into; the SOPS value reaches the env as a pass decrypts it.
const (
	maskToken    = "mask-tok-7c41-plaintext"
	maskPassword = "mask-pw-2b9e-plaintext"
	maskCertOne  = "mask-cert-line-one-a1"
	maskCertTwo  = "mask-cert-line-two-b2"
)

func maskStack() string {
	return fmt.Sprintf(`version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    env_file: ./app.env
    environment:
      MARK: logmask-e2e
      PW_COPY: %[1]s
      PW_B64: %[2]s
      CERT_COPY: "%[3]s\n%[4]s"
      SHORT: abc
    secrets: [db_password, cert]
    stop_grace_period: 1s
secrets:
  db_password: {file: ./db_password.txt}
  cert: {file: ./cert.pem}
`, maskPassword, base64.StdEncoding.EncodeToString([]byte(maskPassword)), maskCertOne, maskCertTwo)
}

func TestLogsBlankSecretValuesAndAreWithheldWhenTheyCannotBeReproduced(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)
	stack := swarmtest.Name(t, "logmask")
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	id, keyFile := ageKeyFile(t, dir)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{
		"deploy/docker-compose.yml": maskStack(),
		"deploy/app.env":            string(sopsagetest.Encrypt(t, "app.env", []byte("LICENSE_KEY="+maskToken+"\n"), id.Recipient)),
		"deploy/db_password.txt":    maskPassword + "\n",
		"deploy/cert.pem":           maskCertOne + "\n" + maskCertTwo + "\n",
	})
	appsFile := oneAppFile(t, dir, stack, repo.Dir)
	const admin = "e2e-logmask-admin-0123456789"
	start := func() (*stoppable, cli) {
		addr := freeAddr(t)
		s := startController(t, appsFile, "e2elogmask", []string{"FLOTILLA_ADMIN_TOKEN=" + admin},
			"--listen", addr, "--log-level", "warn", "--sops-age-key-file", keyFile)
		server := "http://" + addr
		return s, cli{t: t, bin: bin, server: server, env: []string{"FLOTILLA_SERVER=" + server, "FLOTILLA_TOKEN=" + admin}}
	}
	get := func(c cli) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", c.server+"/api/v1/applications/"+stack+"/logs?tail=200", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err.Error() // not listening yet
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	plain := []string{maskToken, maskPassword, base64.StdEncoding.EncodeToString([]byte(maskPassword)), maskCertOne, maskCertTwo}
	leaks := func(where, text string) {
		t.Helper()
		for _, v := range plain {
			if strings.Contains(text, v) {
				t.Errorf("%s shows the secret value %q:\n%s", where, v, text)
			}
		}
	}

	ctl, c := start()
	var out string
	swarmtest.Eventually(t, 90*time.Second, func() (bool, string) {
		var code int
		out, code = c.run("app", "logs", stack, "--tail", "200")
		return code == 0 && strings.Contains(out, "MARK=logmask-e2e") && strings.Contains(out, "PW_COPY="), out
	})
	leaks("flotilla app logs", out)
	for _, want := range []string{"LICENSE_KEY=***", "PW_COPY=***", "PW_B64=***", "CERT_COPY=***", "SHORT=abc"} {
		if !strings.Contains(out, want) {
			t.Errorf("flotilla app logs lacks %q:\n%s", want, out)
		}
	}
	code, h, body := get(c)
	if code != http.StatusOK || !strings.Contains(h.Get(api.LogMaskingHeader), "revision 1") {
		t.Errorf("GET …/logs: %d, %s %q", code, api.LogMaskingHeader, h.Get(api.LogMaskingHeader))
	}
	leaks("GET …/logs", body)
	if !strings.Contains(body, "LICENSE_KEY=***") {
		t.Errorf("GET …/logs lacks the blanked token:\n%s", body)
	}

	// A controller that lost its render and cannot reach the repository
	// again withholds the logs rather than show them unmasked.
	ctl.stop(os.Interrupt, 15*time.Second)
	gone := repo.Dir + ".gone"
	if err := os.Rename(repo.Dir, gone); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.Rename(gone, repo.Dir); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	_, c = start()
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		code, _, body = get(c)
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
	})
	leaks("GET …/logs with the repository unreachable", body)
	t.Logf("refusal: %s", body)
	if !strings.Contains(body, "withheld") {
		t.Errorf("the refusal does not say the logs are withheld: %s", body)
	}
	if out, code := c.run("app", "logs", stack); code == 0 {
		t.Errorf("flotilla app logs succeeded with the repository unreachable:\n%s", out)
	} else {
		leaks("flotilla app logs with the repository unreachable", out)
	}

	// Once the repository is back, the logs are served masked again.
	restore()
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		code, _, body = get(c)
		return code == http.StatusOK && strings.Contains(body, "LICENSE_KEY=***"), fmt.Sprintf("%d %s", code, body)
	})
	leaks("GET …/logs after the repository came back", body)
}
