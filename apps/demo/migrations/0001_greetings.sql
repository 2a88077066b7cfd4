-- The demo app's first migration: one table of greetings per tenant.
-- Portable SQL: the same file runs in a SQLite file and in a PostgreSQL schema.
CREATE TABLE greetings (
    id INTEGER PRIMARY KEY,
    message TEXT NOT NULL
);
