-- Run once in a new tenant's storage: $1 is its slug, $2 its name, $3 its id.
INSERT INTO greetings (id, message) VALUES (1, 'Hello from ' || $2 || ' (' || $1 || '), served from its own storage');
