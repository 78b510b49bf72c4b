# Manual pages: ftfarm(1), ftfarm.json(5), ftfarm-batch(5),
# ftfarm-events(7), installed under $(DESTDIR)$(PREFIX)/share/man by
# `make install` (and removed by `make uninstall`).
MAN_PAGES := $(wildcard man/*.[1-9])
MANDIR = $(DESTDIR)$(PREFIX)/share/man

.PHONY: install-man uninstall-man man-check uninstall
install: install-man
uninstall: uninstall-man

install-man:
	@set -e; for p in $(MAN_PAGES); do \
		s=$${p##*.}; \
		install -d $(MANDIR)/man$$s; \
		install -m 644 $$p $(MANDIR)/man$$s/; \
	done

uninstall-man:
	@set -e; for p in $(MAN_PAGES); do \
		f=$${p##*/}; rm -f $(MANDIR)/man$${f##*.}/$$f; \
	done

# Every page renders without a warning.
man-check:
	@set -e; for p in $(MAN_PAGES); do \
		w=$$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l $$p 2>&1 >/dev/null); \
		if [ -n "$$w" ]; then echo "$$p: $$w"; exit 1; fi; \
	done; echo "manual pages OK"
