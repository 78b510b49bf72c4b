/*
 * page: the status page (master/page.html) built into the master, so
 * that it is served as it is in the source tree and needs no file at run
 * time.  The Makefile rebuilds this object when the page changes.
 */
#include "http.h"

__asm__(".section .rodata\n"
	".global ft_page_html\n"
	".type ft_page_html, @object\n"
	"ft_page_html:\n"
	".incbin \"master/page.html\"\n"
	"1:\n"
	".byte 0\n"
	".balign 8\n"
	".global ft_page_html_len\n"
	".type ft_page_html_len, @object\n"
	"ft_page_html_len:\n"
	".quad 1b - ft_page_html\n"
	".previous\n");
