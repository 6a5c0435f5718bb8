package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"koe/internal/pdftext"
)

// pdfText is a PDF's text for the model, pages marked when there are
// several, so that it can say where it read something.
func pdfText(ctx context.Context, p string, data []byte) (string, error) {
	doc, err := pdftext.Extract(ctx, data)
	var unreadable *pdftext.UnreadableError
	switch {
	case ctx.Err() != nil:
		return "", ctxError(ctx.Err())
	case errors.Is(err, pdftext.ErrEncrypted):
		return "", fmt.Errorf("%q is an encrypted PDF, which read_file cannot open", clip(p))
	case errors.Is(err, pdftext.ErrNoText):
		return "", fmt.Errorf("%q is %w", clip(p), err)
	case errors.As(err, &unreadable):
		return "", fmt.Errorf("%q could not be read as a PDF: %s", clip(p), unreadable.Reason)
	case err != nil:
		return "", fmt.Errorf("%q could not be read as a PDF: %w", clip(p), err)
	}
	if len(doc.Pages) == 1 {
		return doc.Pages[0], nil
	}
	var b strings.Builder
	for i, text := range doc.Pages {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "[page %d]\n%s", i+1, text)
	}
	return b.String(), nil
}
