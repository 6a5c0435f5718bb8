// Package history is koe's store contract: what a store of histories
// offers (Store and the interfaces it is made of: records, summaries,
// prompts, recall entries, knowledge documents and chunks), what every
// backend stores byte for byte (a record's JSON in Open-LLM-VTuber's
// format, so that histories move between the two servers and the web
// client renders them unchanged; a document's text; an embedding), and
// the checks every store call opens with. Package historytest is the
// contract's test suite, which each backend runs.
//
// The backends are packages of their own, one per database: bolt (koe's
// single bbolt file) and postgres (several koe instances sharing one
// database). This package imports neither driver.
//
// Every id that reaches a store is assumed to come from an untrusted
// client and is checked with koe.ValidID before any database access.
package history
