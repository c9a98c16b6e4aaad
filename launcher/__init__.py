"""Process-level entry points around the Django project: start the studio, a worker, the tests."""
