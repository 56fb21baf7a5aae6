/* A shared object that does something the moment it is loaded: its
   constructor writes the file named by $ZDIST_TEST_MARKER. test_security.sh
   puts it where a job's plugin_path points and checks the file never
   appears: a worker that dlopen()ed it would have run foreign code before
   deciding it is no plugin. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void
s_loaded(void)
{
    const char *path = getenv("ZDIST_TEST_MARKER");
    if (!path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        (void)!write(fd, "loaded\n", 7);
        close(fd);
    }
}
