/* Linked with one layer's library whole and only the layers below it (meson.build): the link
 * fails when the layer calls up. Nothing to run. */
int main(void);

int main(void)
{
    return 0;
}
