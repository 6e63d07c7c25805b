package secretstore

import (
	"net/http"

	"github.com/flotilla-gitops/flotilla/application"
)

// WithAWSTransport makes the AWS readers s creates send through wrap, so
// a test can see the requests the real server (kumo) gets.
func WithAWSTransport(s *Stores, wrap func(http.RoundTripper) http.RoundTripper) {
	s.newReader = func(st application.SecretStore) (reader, error) {
		if st.AWS != nil {
			return newAWSReader(st, wrap)
		}
		return newStoreReader(st)
	}
}
