package idem

// journal.go — the unguarded-execution journal, in libidem's line format (idem.h) so that
// `idemctl reconcile` replays it:
//   idem1 TIME_MS SOURCE TENANT GLOBAL_ID SERVICE OPERATION PHASE OUTCOME CODE FP BODY
// one space apart; SOURCE "client" (no coordinator could decide) or "server"
// (PROCEED_UNGUARDED); text fields percent-encoded (every byte outside [A-Za-z0-9._:/-] as
// %XX, a lone "-" too); an empty field is "-"; FP lower-case hex. Appended with O_APPEND and
// fsync'd before Run returns.

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

var journalMu sync.Mutex

func plainByte(c byte) bool {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '.' || c == '_' || c == ':' || c == '/' || c == '-'
}

// journalEnc percent-encodes one field as libidem's put_enc does.
func journalEnc(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	var sb strings.Builder
	for i, c := range b {
		if plainByte(c) && !(i == 0 && len(b) == 1 && c == '-') {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// JournalLine formats one journal line (with its newline).
func JournalLine(at time.Time, source, tenant string, key StepKey, fp []byte, r Result) string {
	fpField := "-"
	if len(fp) > 0 {
		fpField = hex.EncodeToString(fp)
	}
	out := r.Outcome
	if out < OutcomeSucceeded || out > OutcomeUnknown {
		out = OutcomeUnknown
	}
	return fmt.Sprintf("idem1 %d %s %s %s %s %s %s %s %d %s %s\n", at.UnixMilli(), source,
		journalEnc([]byte(tenant)), journalEnc([]byte(key.GlobalID)), journalEnc([]byte(key.Service)),
		journalEnc([]byte(key.Operation)), key.phase(), out, r.Code, fpField, journalEnc(r.Body))
}

func appendJournal(path, line string) *Error {
	journalMu.Lock()
	defer journalMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return &Error{Code: "DATA_LOSS", Field: "options.journal_path", Message: "journal: " + err.Error()}
	}
	_, err = f.WriteString(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &Error{Code: "DATA_LOSS", Field: "options.journal_path", Message: "journal: " + err.Error()}
	}
	return nil
}
