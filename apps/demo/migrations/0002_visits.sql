-- Visits counted in the tenant's own storage (the demo's write path).
CREATE TABLE visits (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    at BIGINT NOT NULL
);
