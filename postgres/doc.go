// Package postgres is koe's store (history.Store) in PostgreSQL, for
// several koe instances sharing one database (store: postgres). koe owns
// its schema: it creates and migrates it at start, a versioned migration
// at a time, so an operator only provides a database.
//
// Tables, all keyed by conf uid first:
//
//	koe_histories            a history per row; last_seq numbers its records
//	koe_records              a record's JSON, as the bbolt store keeps it
//	koe_record_images        the pictures of a record, apart from its JSON
//	koe_summaries            memory summaries, by first turn
//	koe_prompts              the prompts users edit
//	koe_recall_entries       recall's entries with their embeddings
//	koe_recall_forgotten     entries forgotten for good
//	koe_recall_marks         how far each history is indexed
//	koe_recall_models        the model that made a character's embeddings
//	koe_knowledge_docs       knowledge documents with their text
//	koe_knowledge_local_chunks  the local knowledge index's chunks
//	koe_mcp_logins           MCP servers' OAuth logins (secrets: never logged)
//
// Everything kept of a history references its row, so deleting the
// history deletes the rest in the same statement.
//
// The package also holds knowledge's cluster index (KnowledgeIndex,
// knowledge.store: postgres), with a pool and a schema of its own
// (koe_knowledge_chunks, koe_knowledge_dims, versioned in
// koe_schema_migrations) on the database knowledge.dsn names.
package postgres
