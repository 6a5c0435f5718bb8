package knowledge

// Closing is done once Close has begun stopping the service.
func (s *Service) Closing() <-chan struct{} { return s.ctx.Done() }

// ManualPages are the pages of the manual in testdata.
var ManualPages = manualPages
